package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

var boardName = regexp.MustCompile(`^[a-z0-9_]+$`)

// validate checks the decoded configuration, resolves the remaining
// defaults and builds the boards and schemas of c. It records every error.
func (l *loader) validate(c *Config, s *spec) {
	l.validateKafka(c)
	l.validateRedis(c)
	l.validateSecure(c)
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
		l.validateName(b, p)
		if broken[p] {
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
}

func (l *loader) validateKafka(c *Config) {
	k := &c.Kafka
	if len(k.Brokers) == 0 {
		l.errorf("kafka.brokers", "no brokers (set kafka.brokers or RANKD_KAFKA_BROKERS)")
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
	switch {
	case r.Addr == "" && len(r.Addrs) == 0:
		l.errorf("redis.addr", "no address (set redis.addr, redis.addrs for a cluster, or RANKD_REDIS_ADDR)")
	case r.Addr != "" && len(r.Addrs) > 0:
		l.errorf("redis.addrs", "set either addr (standalone) or addrs (cluster), not both")
	case len(r.Addrs) > 0 && r.DB != 0:
		l.errorf("redis.db", "a cluster has only db 0, got %d", r.DB)
	}
	if r.DB < 0 {
		l.errorf("redis.db", "must not be negative, got %d", r.DB)
	}
	if r.Prefix == "" || strings.ContainsAny(r.Prefix, "{}:") {
		l.errorf("redis.prefix", "prefix %q must be non-empty without '{', '}' or ':'", r.Prefix)
	} else if err := store.ValidatePrefix(r.Prefix); err != nil {
		l.errorf("redis.prefix", "%v", err)
	}
	if r.DedupeTTL <= 0 {
		l.errorf("redis.dedupe_ttl", "must be positive, got %v", r.DedupeTTL)
	}
	if r.PoolSize < 0 {
		l.errorf("redis.pool_size", "must not be negative, got %d", r.PoolSize)
	}
}

// validateName checks the name of a board, also of a board that failed
// to decode for another reason (issue 11: its name error was hidden).
func (l *loader) validateName(b *ranking.Board, p string) {
	for _, e := range l.errs {
		if e.Field == p+".name" {
			return // the name did not decode: reported already
		}
	}
	switch {
	case b.Name == "":
		l.errorf(p, "missing name")
	case !boardName.MatchString(b.Name):
		l.errorf(p+".name", "board name %q must match [a-z0-9_]+", b.Name)
	}
}

// validateBoard checks one board and resolves its window and retention.
func (l *loader) validateBoard(b *ranking.Board, p string) {
	f := func(name string) string { return p + "." + name }
	if !l.has(f("window")) && l.has(f("every")) {
		b.Window = ranking.WindowPeriodic
	}
	switch b.Window {
	case ranking.WindowTotal:
		for _, k := range []string{"every", "periods"} {
			if l.has(f(k)) {
				l.errorf(f(k), "%s is only for periodic and rolling boards", k)
			}
		}
	case ranking.WindowPeriodic:
		if l.has(f("periods")) {
			l.errorf(f("periods"), "periods is only for rolling boards")
		}
	case ranking.WindowRolling:
		if b.Periods < 1 {
			l.errorf(f("periods"), "a rolling board needs periods >= 1, got %d", b.Periods)
		}
		if b.Aggregate != ranking.AggSum {
			l.errorf(f("aggregate"), "a rolling board must use aggregate sum, got %v", b.Aggregate)
		}
	}
	if b.Window != ranking.WindowTotal && !l.has(f("every")) {
		l.errorf(f("every"), "a %v board needs every (30m, 1h, ..., 1d, 1w, 1mo)", b.Window)
	}
	for _, k := range []string{"tie_epoch", "tie_horizon"} {
		if l.has(f(k)) && b.Window != ranking.WindowTotal {
			l.errorf(f(k), "%s is only for total boards", k)
		}
	}
	if l.has(f("tie_horizon")) && b.TieHorizon <= 0 {
		l.errorf(f("tie_horizon"), "must be positive, got %v", b.TieHorizon)
	}
	if b.Decimals < 0 || b.Decimals > 18 {
		l.errorf(f("decimals"), "must be in [0, 18], got %d", b.Decimals)
	}
	if b.Grace < 0 {
		l.errorf(f("grace"), "must not be negative, got %v", b.Grace)
	}
	l.validateKeepTop(b, p)
	if b.HasBase && (b.Aggregate != ranking.AggSum || b.Window == ranking.WindowRolling) {
		l.errorf(f("base"), "base needs a periodic or total board with aggregate sum (this one is %v with aggregate %v)", b.Window, b.Aggregate)
	}
	seen := map[string]bool{}
	for i, sf := range b.Sort {
		if !seen[sf.Name] && isIdent(sf.Name) {
			seen[sf.Name] = true
			continue
		}
		l.errorf(fmt.Sprintf("%s.sort[%d].field", p, i), "sort factor name %q is empty, repeated or not an identifier", sf.Name)
	}
	l.resolveRetention(b, p)
	// The codec's own checks of the window are reported above: check the
	// rest of the board only (issue 11: a rolling board without periods
	// was reported twice).
	cb := *b
	if cb.Window == ranking.WindowRolling && cb.Periods < 1 {
		cb.Periods = 1
	}
	if cb.Window != ranking.WindowTotal && cb.Every.Kind == ranking.UnitNone {
		return
	}
	if _, err := ranking.NewCodec(&cb); err != nil {
		at := p
		switch {
		case len(b.Sort) > 0:
			at = f("sort")
		case l.has(f("tie_unit")):
			at = f("tie_unit")
		case l.has(f("tiebreak")):
			at = f("tiebreak")
		}
		l.errorf(at, "%v", err)
	}
}

// validateKeepTop allows keep_top only where an update never lowers a
// member's rank position, so that a trimmed member can never belong back.
func (l *loader) validateKeepTop(b *ranking.Board, p string) {
	if b.KeepTop < 0 {
		l.errorf(p+".keep_top", "must not be negative, got %d", b.KeepTop)
	}
	if b.KeepTop <= 0 {
		return
	}
	if b.Window == ranking.WindowRolling {
		l.errorf(p+".keep_top", "keep_top does not work on rolling boards (members fall as periods leave the window)")
		return
	}
	ok := (b.Aggregate == ranking.AggSum && b.Order == ranking.Desc ||
		b.Aggregate == ranking.AggMax && b.Order == ranking.Desc ||
		b.Aggregate == ranking.AggMin && b.Order == ranking.Asc) &&
		(b.Tiebreak == ranking.TieNone || b.Tiebreak == ranking.TieFirst)
	if !ok {
		l.errorf(p+".keep_top", "keep_top needs updates that never lower a member: aggregate sum or max with order desc, "+
			"or min with order asc, and tiebreak none or first (this board: %s)", describe(b))
	}
}

// resolveRetention applies the default retention or checks the given one.
func (l *loader) resolveRetention(b *ranking.Board, p string) {
	path := p + ".retention"
	if !l.has(path) {
		b.Retention = defaultRetention(b)
		return
	}
	switch {
	case b.Window == ranking.WindowTotal:
		l.errorf(path, "total boards never expire: remove retention")
	case b.Retention < b.Grace:
		l.errorf(path, "retention %v is shorter than grace %v", b.Retention, b.Grace)
	case b.Window == ranking.WindowRolling && b.Periods >= 1:
		if least := defaultRetention(b) - b.Grace; b.Retention < least {
			l.errorf(path, "a rolling board of %d × %v needs a retention of at least %v (periods+1 of the longest period)",
				b.Periods, b.Every, least)
		}
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

// isIdent reports whether s is an identifier: a letter or '_', then
// letters, digits or '_'.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
