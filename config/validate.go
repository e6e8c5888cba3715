package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

// validate checks the decoded configuration, resolves the remaining
// defaults and builds the boards and schemas of c. It records every error.
func (l *loader) validate(c *Config, s *spec) {
	l.validateKafka(c)
	l.validateRedis(c)
	l.validateSecure(c)
	l.validateAPI(c)
	if c.HTTP.Listen == "" {
		l.errorf("http.listen", "empty listen address")
	}
	if c.Rollover.Lead <= 0 {
		l.errorf("rollover.lead", "must be positive, got %v", c.Rollover.Lead)
	}
	if c.Rollover.Interval <= 0 {
		l.errorf("rollover.interval", "must be positive, got %v", c.Rollover.Interval)
	}
	// Boards and routes that failed to decode are not validated further:
	// their errors would only echo the decoding error.
	broken := map[string]bool{}
	for _, e := range l.errs {
		if i := strings.IndexByte(e.Field, ']'); i >= 0 && (strings.HasPrefix(e.Field, "boards[") || strings.HasPrefix(e.Field, "routes[")) {
			broken[e.Field[:i+1]] = true
		}
	}
	c.schemas = l.schemas(c, s)
	invalid := map[string]bool{}
	first := map[string]string{} // board name -> path of its first declaration
	for i, b := range s.boards {
		p := fmt.Sprintf("boards[%d]", i)
		before := len(l.errs)
		if broken[p] {
			l.validateName(b, p)
			invalid[b.Name] = true
		} else {
			l.validateBoard(b, p)
		}
		if prev, dup := first[b.Name]; dup && b.Name != "" {
			l.errorf(p+".name", "duplicate board name %q (first declared at line %d)", b.Name, l.at(prev).line)
		} else {
			first[b.Name] = p
		}
		if len(l.errs) > before {
			invalid[b.Name] = true
		}
	}
	c.boards = s.boards
	l.validateRoutes(c, invalid, broken)
	l.validateStandings(c, s)
}

func (l *loader) validateKafka(c *Config) {
	k := &c.Kafka
	if len(k.Brokers) == 0 {
		l.errorf("kafka.brokers", "no brokers (set kafka.brokers or %s)", EnvKafkaBrokers)
	}
	for i, b := range k.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			l.errorf(fmt.Sprintf("kafka.brokers[%d]", i), "broker %q is not host:port", b)
		}
	}
	positive := func(path string, v int) {
		if v < 1 {
			l.errorf(path, "must be at least 1, got %d", v)
		}
	}
	positive("kafka.workers", k.Workers)
	positive("kafka.batch.count", k.Batch.Count)
	positive("kafka.batch.bytes", k.Batch.Bytes)
	positive("kafka.max_message_bytes", k.MaxMessageBytes)
	positive("kafka.min_bytes", k.MinBytes)
	if k.Group == "" {
		l.errorf("kafka.group", "empty consumer group")
	}
	if k.Batch.Linger < 0 {
		l.errorf("kafka.batch.linger", "must not be negative, got %v", k.Batch.Linger)
	}
	if k.FutureSkew < 0 {
		l.errorf("kafka.future_skew", "must not be negative (0 disables the check), got %v", k.FutureSkew)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"kafka.session_timeout", k.SessionTimeout}, {"kafka.heartbeat_interval", k.HeartbeatInterval},
		{"kafka.rebalance_timeout", k.RebalanceTimeout}, {"kafka.shutdown_timeout", k.ShutdownTimeout}} {
		if d.v <= 0 {
			l.errorf(d.field, "must be positive, got %v", d.v)
		}
	}
	if k.HeartbeatInterval >= k.SessionTimeout {
		l.errorf("kafka.heartbeat_interval", "must be shorter than session_timeout (%v), got %v", k.SessionTimeout, k.HeartbeatInterval)
	}
	if k.MaxWait <= 0 {
		l.errorf("kafka.max_wait", "must be positive, got %v", k.MaxWait)
	}
	if k.DeadLetterTopic == "" {
		l.errorf("kafka.dead_letter_topic", "empty topic name")
	}
}

func (l *loader) validateRedis(c *Config) {
	r := &c.Redis
	if r.Sentinel.Enabled() {
		l.validateSentinel(r)
	} else {
		switch {
		case r.Addr == "" && len(r.Addrs) == 0:
			l.errorf("redis.addr", "no address (set redis.addr, redis.addrs for a cluster, redis.sentinel, or %s)", EnvRedisAddr)
		case r.Addr != "" && len(r.Addrs) > 0:
			l.errorf("redis.addrs", "set either addr (standalone) or addrs (cluster), not both")
		case len(r.Addrs) > 0 && r.DB != 0:
			l.errorf("redis.db", "a cluster has only db 0, got %d", r.DB)
		}
	}
	if r.DB < 0 {
		l.errorf("redis.db", "must not be negative, got %d", r.DB)
	}
	// The store's rule (non-empty, no hash tag braces); the file also
	// refuses ':', so that no prefix looks like another's replay generation
	// (<prefix>:g<N>, <prefix>:gens).
	if r.Prefix == "" || strings.ContainsAny(r.Prefix, "{}:") {
		l.errorf("redis.prefix", "prefix %q must be non-empty without '{', '}' or ':'", r.Prefix)
	}
	if r.DedupeTTL <= 0 {
		l.errorf("redis.dedupe_ttl", "must be positive, got %v", r.DedupeTTL)
	}
	if r.PoolSize < 0 {
		l.errorf("redis.pool_size", "must not be negative, got %d", r.PoolSize)
	}
	if r.CallUpdates < MinCallUpdates || r.CallUpdates > MaxCallUpdates {
		l.errorf("redis.call_updates", "must be %d to %d, got %d", MinCallUpdates, MaxCallUpdates, r.CallUpdates)
	}
}

// validateSentinel checks redis.sentinel: a master name, at least one
// sentinel address, and no address of another kind (the sentinels give the
// primary's address).
func (l *loader) validateSentinel(r *Redis) {
	s := r.Sentinel
	if r.Addr != "" {
		l.errorf("redis.addr", "set with redis.sentinel: leave it out (the sentinels give the primary's address)")
	}
	if len(r.Addrs) > 0 {
		l.errorf("redis.addrs", "set with redis.sentinel: choose a cluster (addrs) or Sentinel, not both")
	}
	if s.MasterName == "" {
		l.errorf("redis.sentinel.master_name", "no master name (the <name> of the sentinels' \"sentinel monitor <name> ...\")")
	}
	if len(s.Addrs) == 0 {
		l.errorf("redis.sentinel.addrs", "no sentinel addresses (set redis.sentinel.addrs or %s)", EnvRedisSentinelAddrs)
	}
	for i, a := range s.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			l.errorf(fmt.Sprintf("redis.sentinel.addrs[%d]", i), "sentinel %q is not host:port", a)
		}
	}
}

// validateName checks the name of a board that failed to decode for
// another reason (issue 11: its name error was hidden); validateBoard
// checks the name of the others.
func (l *loader) validateName(b *ranking.Board, p string) {
	for _, e := range l.errs {
		if e.Field == p+".name" {
			return // the name did not decode: reported already
		}
	}
	l.boardErrors(p, b.ValidateName())
}

// validateBoard resolves the window the file implies, checks the board
// with the model's rules (ranking.Board.ValidateWritten), reporting each
// problem at the setting's position, and resolves the remaining defaults
// (ranking.Board.Normalize).
func (l *loader) validateBoard(b *ranking.Board, p string) {
	written := func(setting string) bool { return l.has(p + "." + setting) }
	// A board with every and no window is periodic (the file's default;
	// the model's zero Window is total).
	if !written("window") && written("every") {
		b.Window = ranking.WindowPeriodic
	}
	err := b.ValidateWritten(written)
	if b.Window == ranking.WindowRolling && !written("periods") {
		// Said here rather than as the model's "periods >= 1, got 0" at
		// the board's first line: no periods key was written at all.
		var rest []error
		for _, e := range unjoin(err) {
			if be, ok := e.(*ranking.BoardError); !ok || be.Setting != "periods" {
				rest = append(rest, e)
			}
		}
		err = errors.Join(rest...)
		at := l.at(p + ".window")
		l.errs = append(l.errs, &Error{File: l.file, Line: at.line, Column: at.col, Field: p + ".periods",
			Msg: fmt.Sprintf("board %q is rolling but has no periods: add \"periods: N\" to it, for a window of the last N periods of every (e.g. every: 1d with periods: 7 for the last 7 days)", b.Name)})
	}
	l.boardErrors(p, err)
	b.Normalize()
}

// boardErrors records the errors of the board at path p (each a
// *ranking.BoardError, joined) at the positions of their settings.
func (l *loader) boardErrors(p string, err error) {
	if err == nil {
		return
	}
	for _, e := range unjoin(err) {
		var be *ranking.BoardError
		if !errors.As(e, &be) {
			l.errorf(p, "%v", e)
			continue
		}
		path := p
		if be.Setting != "" {
			path += "." + be.Setting
		}
		l.errorf(path, "%v", be.Err)
	}
}

// validateRoutes checks the topics and compiles the routes. Route errors
// about boards already reported invalid are dropped.
func (l *loader) validateRoutes(c *Config, invalid, broken map[string]bool) {
	routed := map[string]bool{}
	for _, r := range c.Routes {
		routed[r.Topic] = true
	}
	if !l.has("kafka.topics") {
		for t := range routed {
			c.Kafka.Topics = append(c.Kafka.Topics, t)
		}
		slices.Sort(c.Kafka.Topics)
	} else {
		for i, t := range c.Kafka.Topics {
			p := fmt.Sprintf("kafka.topics[%d]", i)
			switch {
			case c.schemas[t] == nil:
				l.errorf(p, "topic %q has no schema (declare it under topics)", t)
			case !routed[t]:
				l.errorf(p, "topic %q has no route", t)
			}
		}
		for i, r := range c.Routes {
			if r.Topic != "" && !slices.Contains(c.Kafka.Topics, r.Topic) {
				l.errorf(fmt.Sprintf("routes[%d].topic", i), "topic %q is not consumed (add it to kafka.topics)", r.Topic)
			}
		}
	}
	if slices.Contains(c.Kafka.Topics, c.Kafka.DeadLetterTopic) {
		l.errorf("kafka.dead_letter_topic", "the dead-letter topic %q is also consumed", c.Kafka.DeadLetterTopic)
	}
	if len(c.Routes) == 0 {
		l.errorf("routes", "no routes")
	}
	var routes []ingest.Route
	var index []int // routes[i] is c.Routes[index[i]]
	for i, r := range c.Routes {
		if !broken[fmt.Sprintf("routes[%d]", i)] {
			routes = append(routes, r)
			index = append(index, i)
		}
	}
	_, err := ingest.NewRouter(c.boards, c.schemas, routes)
	for _, e := range unjoin(err) {
		var re *ingest.RouteError
		if !errors.As(e, &re) {
			if len(invalid) == 0 && e != nil {
				l.errorf("routes", "%v", e)
			}
			continue
		}
		i := index[re.Index]
		var j int
		if _, err := fmt.Sscanf(re.Field, "boards[%d]", &j); err == nil && invalid[c.Routes[i].Boards[j]] {
			continue
		}
		if re.Field == "topic" && c.Routes[i].Topic == "" {
			l.errorf(fmt.Sprintf("routes[%d]", i), "missing topic")
			continue
		}
		l.errorf(fmt.Sprintf("routes[%d].%s", i, re.Field), "%v", re.Err)
	}
}
