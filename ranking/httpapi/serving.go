package httpapi

import (
	"net/http"
	"runtime"
)

// The serving bound. A response is written to its connection (the write
// system call, most of what a cached read costs) by at most a few requests
// at a time, twice GOMAXPROCS by default: the others wait, parked, for
// their turn. So however many clients read, the goroutines ready to run
// are a few writers and the requests being parsed, and the consumer's
// goroutines, which wait in the same run queues, are scheduled within
// microseconds instead of behind a thousand readers. The wait is bounded
// by the open connections (ConnLimit): each has at most one request in
// flight.

// DefaultServing returns the default bound on responses written at once:
// twice GOMAXPROCS.
func DefaultServing() int { return 2 * runtime.GOMAXPROCS(0) }

// WithServingLimit bounds the responses written to their connections at
// once (default DefaultServing()); n <= 0: no bound.
func WithServingLimit(n int) Option { return func(c *config) { c.serving = n } }

// flush writes what the handler wrote to w to the connection, within the
// serving bound; a request whose client went away meanwhile is not
// written.
func (s *server) flush(w http.ResponseWriter, r *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok || s.serving == nil {
		return // net/http writes it when the handler returns
	}
	select {
	case s.serving <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	f.Flush()
	<-s.serving
}
