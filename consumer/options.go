package consumer

import (
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Option sets an optional seam of New or NewRankingSink.
type Option func(*options)

type options struct {
	reg    prometheus.Registerer
	log    *slog.Logger
	now    func() time.Time
	topics map[string]string
	boards map[string]bool
	replay bool
}

func newOptions(opts []Option) options {
	o := options{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithRegisterer registers the package's metrics on reg (default: a private
// registry, so nothing is exported). The same registerer may be given to
// New and NewRankingSink: they share the collectors.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.reg = reg }
}

// WithLogger sets the logger (default: discard). Only the top of each loop
// logs.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithClock sets the wall clock (default time.Now). It is used for the
// event-to-visible lag and the rollover schedule; batching timers and
// backoff use real time.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithTopicMap tells NewRankingSink which schema and routes serve a Kafka
// topic whose name differs from the topic name of the config (for example
// "prod.gift" -> "gift"). Topics not in m are their own schema topic. Other
// constructors ignore it.
func WithTopicMap(m map[string]string) Option {
	return func(o *options) { o.topics = m }
}

// WithBoards makes NewRankingSink apply the updates of these boards only
// (a replay that rebuilds some boards); the others are dropped after
// routing. Other constructors ignore it.
func WithBoards(boards []string) Option {
	return func(o *options) {
		o.boards = map[string]bool{}
		for _, b := range boards {
			o.boards[b] = true
		}
	}
}

// WithReplay makes NewRankingSink a replay's sink: it applies with
// store.Store.Apply and writes stream time marks, and keeps no position
// records (those are live consumption's). Other constructors ignore it.
func WithReplay() Option { return func(o *options) { o.replay = true } }
