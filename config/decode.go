package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

// spec is what the file declares beyond Config's plain sections: the
// boards (defaults applied, retention not yet resolved) and the topic
// overrides.
type spec struct {
	boards []*ranking.Board
	topics []*topicSpec
}

// topicSpec overrides or declares the schema of one topic.
type topicSpec struct {
	name, path string
	id, ts     string // "": keep the default
	fields     []ingest.Field
	// Limits, applied when the file sets them (see loader.has).
	maxIDLen, maxKeyLen int
	minTime             time.Time
}

// decodeRoot decodes the whole file into c and s.
func (l *loader) decodeRoot(root *yaml.Node, c *Config, s *spec) {
	k, r := &c.Kafka, &c.Redis
	l.mapping(root, "", map[string]field{
		"kafka": func(n *yaml.Node, p string) {
			l.mapping(n, p, map[string]field{
				"brokers": l.strs(&k.Brokers),
				"group":   l.str(&k.Group),
				"topics":  l.strs(&k.Topics),
				"workers": l.integer(&k.Workers),
				"batch": func(n *yaml.Node, p string) {
					l.mapping(n, p, map[string]field{
						"count":  l.integer(&k.Batch.Count),
						"bytes":  l.integer(&k.Batch.Bytes),
						"linger": l.duration(&k.Batch.Linger),
					})
				},
				"dead_letter_topic":  l.str(&k.DeadLetterTopic),
				"max_message_bytes":  l.integer(&k.MaxMessageBytes),
				"future_skew":        l.duration(&k.FutureSkew),
				"min_bytes":          l.integer(&k.MinBytes),
				"max_wait":           l.duration(&k.MaxWait),
				"session_timeout":    l.duration(&k.SessionTimeout),
				"heartbeat_interval": l.duration(&k.HeartbeatInterval),
				"rebalance_timeout":  l.duration(&k.RebalanceTimeout),
				"shutdown_timeout":   l.duration(&k.ShutdownTimeout),
				"tls":                l.tlsSection(&k.TLS),
				"sasl":               l.saslSection(&k.SASL),
			})
		},
		"redis": func(n *yaml.Node, p string) {
			l.mapping(n, p, map[string]field{
				"addr":         l.str(&r.Addr),
				"addrs":        l.strs(&r.Addrs),
				"db":           l.integer(&r.DB),
				"password":     l.inlineSecret(EnvRedisPassword, "redis.password_file"),
				"prefix":       l.str(&r.Prefix),
				"dedupe_ttl":   l.duration(&r.DedupeTTL),
				"pool_size":    l.integer(&r.PoolSize),
				"call_updates": l.integer(&r.CallUpdates),

				// secure.go
				"username":      l.str(&r.Username),
				"password_file": l.str(&r.PasswordFile),
				"tls":           l.tlsSection(&r.TLS),
				"sentinel":      l.sentinelSection(&r.Sentinel),
			})
		},
		"http": func(n *yaml.Node, p string) {
			l.mapping(n, p, l.httpFields(&c.HTTP))
		},
		"api": func(n *yaml.Node, p string) {
			l.mapping(n, p, l.apiFields(&c.API))
		},
		"rollover": func(n *yaml.Node, p string) {
			l.mapping(n, p, map[string]field{
				"lead":     l.duration(&c.Rollover.Lead),
				"interval": l.duration(&c.Rollover.Interval),
			})
		},
		"topics": func(n *yaml.Node, p string) {
			l.dict(n, p, func(name string, v *yaml.Node, p string) {
				s.topics = append(s.topics, l.topic(name, v, p))
			})
		},
		"boards": func(n *yaml.Node, p string) {
			l.sequence(n, p, func(v *yaml.Node, p string) { s.boards = append(s.boards, l.board(v, p)) })
		},
		"standings": l.standingsSection(&c.Standings),
		"routes": func(n *yaml.Node, p string) {
			l.sequence(n, p, func(v *yaml.Node, p string) { c.Routes = append(c.Routes, l.route(v, p)) })
		},
	})
}

// dict calls f for every key of mapping n (keys are names, not fields).
func (l *loader) dict(n *yaml.Node, path string, f func(key string, v *yaml.Node, path string)) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		l.errorAt(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		p := join(path, k.Value)
		if seen[k.Value] {
			l.errorAt(k, p, "duplicate key")
			continue
		}
		seen[k.Value] = true
		l.pos[p] = pos{v.Line, v.Column}
		f(k.Value, v, p)
	}
}

// enum decodes one of the given names.
func enum[T any](l *loader, dst *T, names []string, vals []T) field {
	return func(n *yaml.Node, path string) {
		s, ok := l.scalar(n, path)
		if !ok {
			return
		}
		i := slices.Index(names, strings.ToLower(s))
		if i < 0 {
			l.errorAt(n, path, "unknown value %q (want %s)", s, strings.Join(names, ", "))
			return
		}
		*dst = vals[i]
	}
}

// named decodes one of vals by its String name.
func named[T fmt.Stringer](l *loader, dst *T, vals []T) field {
	names := make([]string, len(vals))
	for i, v := range vals {
		names[i] = v.String()
	}
	return enum(l, dst, names, vals)
}

var weekdays = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// board decodes one board over the per-board defaults.
func (l *loader) board(n *yaml.Node, path string) *ranking.Board {
	b := ranking.NewBoard("")
	l.mapping(n, path, map[string]field{
		"name":   l.str(&b.Name),
		"title":  l.str(&b.Title),
		"window": named(l, &b.Window, ranking.Windows()),
		"every": func(n *yaml.Node, p string) {
			if s, ok := l.scalar(n, p); ok {
				u, err := ranking.ParseUnit(s)
				if err != nil {
					l.errorAt(n, p, "%v", err)
				}
				b.Every = u
			}
		},
		"periods": l.integer(&b.Periods),
		"timezone": func(n *yaml.Node, p string) {
			s, ok := l.scalar(n, p)
			if !ok {
				return
			}
			loc, err := time.LoadLocation(s)
			if err != nil || s == "" || s == "Local" {
				l.errorAt(n, p, "unknown time zone %q (want an IANA name such as UTC or Asia/Shanghai)", s)
				return
			}
			b.Location = loc
		},
		"week_start": enum(l, &b.WeekStart, weekdays,
			[]time.Weekday{time.Sunday, time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday}),
		"dims":        l.strs(&b.Dims),
		"aggregate":   named(l, &b.Aggregate, ranking.Aggregates()),
		"order":       named(l, &b.Order, ranking.Orders()),
		"tiebreak":    named(l, &b.Tiebreak, ranking.Tiebreaks()),
		"tie_unit":    enum(l, &b.TieUnit, []string{"1ms", "1s", "1m"}, []time.Duration{time.Millisecond, time.Second, time.Minute}),
		"tie_epoch":   l.instant(&b.TieEpoch),
		"tie_horizon": l.duration(&b.TieHorizon),
		"sort": func(n *yaml.Node, p string) {
			l.sequence(n, p, func(v *yaml.Node, p string) {
				f := ranking.SortField{Order: ranking.Desc}
				l.mapping(v, p, map[string]field{
					"field": l.str(&f.Name),
					"order": named(l, &f.Order, ranking.Orders()),
					"bits":  l.integer(&f.Bits),
				})
				b.Sort = append(b.Sort, f)
			})
		},
		"decimals":  l.integer(&b.Decimals),
		"keep_top":  l.integer(&b.KeepTop),
		"retention": l.duration(&b.Retention),
		"grace":     l.duration(&b.Grace),
		"base":      l.boolean(&b.HasBase),
		"publish":   l.publish(path),
	})
	return b
}

// route decodes one routing rule.
func (l *loader) route(n *yaml.Node, path string) ingest.Route {
	var r ingest.Route
	l.mapping(n, path, map[string]field{
		"topic":  l.str(&r.Topic),
		"when":   l.str(&r.When),
		"member": l.str(&r.Member),
		"score":  l.str(&r.Score),
		"base":   l.str(&r.Base),
		"sort": func(n *yaml.Node, p string) {
			r.Sort = map[string]string{}
			l.dict(n, p, func(name string, v *yaml.Node, p string) {
				if s, ok := l.scalar(v, p); ok {
					r.Sort[name] = s
				}
			})
		},
		"boards": l.strs(&r.Boards),
	})
	return r
}

// instant decodes an RFC 3339 time or a UTC date.
func (l *loader) instant(dst *time.Time) field {
	return func(n *yaml.Node, p string) {
		s, ok := l.scalar(n, p)
		if !ok {
			return
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			if t, err = time.Parse(time.DateOnly, s); err != nil {
				l.errorAt(n, p, "invalid time %q (want RFC 3339, e.g. 2025-01-01T00:00:00+08:00, or a UTC date 2025-01-01)", s)
				return
			}
		}
		*dst = t
	}
}

// topic decodes a topic's schema override.
func (l *loader) topic(name string, n *yaml.Node, path string) *topicSpec {
	// A limit that fails to decode keeps its (valid) default: one error.
	t := &topicSpec{name: name, path: path, maxIDLen: ingest.DefaultMaxIDLen, maxKeyLen: ingest.DefaultMaxKeyLen}
	l.mapping(n, path, map[string]field{
		"id":          l.str(&t.id),
		"ts":          l.str(&t.ts),
		"max_id_len":  l.integer(&t.maxIDLen),
		"max_key_len": l.integer(&t.maxKeyLen),
		"min_time":    l.instant(&t.minTime),
		"fields": func(n *yaml.Node, p string) {
			l.dict(n, p, func(fname string, v *yaml.Node, p string) {
				if f, ok := l.schemaField(fname, v, p); ok {
					t.fields = append(t.fields, f)
				}
			})
		},
	})
	return t
}

// schemaField decodes "name: type" or "name: {type, required, default,
// min, max, max_len}". A field with an error is left out (false), so that
// the schema's validation does not report it again.
func (l *loader) schemaField(name string, n *yaml.Node, path string) (ingest.Field, bool) {
	f := ingest.Field{Name: name}
	var typ string
	var defNode, minNode, maxNode, lenNode *yaml.Node
	node := func(dst **yaml.Node) field {
		return func(n *yaml.Node, p string) {
			if _, ok := l.scalar(n, p); ok {
				*dst = n
			}
		}
	}
	if n.Kind == yaml.ScalarNode {
		typ = n.Value
	} else {
		l.mapping(n, path, map[string]field{
			"type":     l.str(&typ),
			"required": l.boolean(&f.Required),
			"default":  node(&defNode),
			"min":      node(&minNode),
			"max":      node(&maxNode),
			"max_len": func(n *yaml.Node, p string) {
				before := len(l.errs)
				if l.integer(&f.MaxLen)(n, p); len(l.errs) == before {
					lenNode = n
				}
			},
		})
	}
	t, err := ingest.ParseFieldType(typ)
	if err != nil {
		l.errorf(join(path, "type"), "%v", err)
		return f, false
	}
	f.Type = t
	ok := true
	if defNode != nil {
		v, err := parseValue(t, defNode)
		if err != nil {
			l.errorAt(defNode, join(path, "default"), "%q is not a valid %s", scalarText(defNode), t)
			ok = false
		}
		f.Default = v
	}
	for _, b := range []struct {
		key string
		n   *yaml.Node
		dst *any
	}{{"min", minNode, &f.Min}, {"max", maxNode, &f.Max}} {
		if b.n == nil {
			continue
		}
		p := join(path, b.key)
		if t != ingest.TypeInt && t != ingest.TypeFloat {
			l.errorAt(b.n, p, "%s is only for int and float fields, not %s", b.key, t)
			ok = false
			continue
		}
		v, err := parseValue(t, b.n)
		if fv, isFloat := v.(float64); err != nil || isFloat && (math.IsNaN(fv) || math.IsInf(fv, 0)) {
			l.errorAt(b.n, p, "%q is not a valid %s", scalarText(b.n), t)
			ok = false
			continue
		}
		*b.dst = v
	}
	if lenNode != nil && ok {
		switch p := join(path, "max_len"); {
		case t != ingest.TypeString:
			l.errorAt(lenNode, p, "max_len is only for string fields, not %s", t)
			ok = false
		case f.MaxLen < 1:
			l.errorAt(lenNode, p, "must be at least 1, got %d", f.MaxLen)
			ok = false
		}
	}
	if !ok {
		return f, false
	}
	if f.Min != nil && f.Max != nil {
		if err := (ingest.Field{Type: t, Max: f.Max}).Check(f.Min); err != nil {
			l.errorAt(maxNode, join(path, "max"), "max %v is below min %v", f.Max, f.Min)
			return f, false
		}
	}
	if f.Default != nil {
		if err := f.Check(f.Default); err != nil {
			l.errorAt(defNode, join(path, "default"), "default %v: %v", f.Default, err)
			return f, false
		}
	}
	return f, true
}

// scalarText returns the text of scalar n; "" for null.
func scalarText(n *yaml.Node) string {
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

// parseValue parses scalar n as a value of type t.
func parseValue(t ingest.FieldType, n *yaml.Node) (any, error) {
	s := scalarText(n)
	switch t {
	case ingest.TypeInt:
		return strconv.ParseInt(s, 10, 64)
	case ingest.TypeFloat:
		return strconv.ParseFloat(s, 64)
	case ingest.TypeBool:
		return strconv.ParseBool(s)
	}
	return s, nil
}

// schemas builds the schema of every topic: the defaults of gift, like and
// comment, overridden and extended by the topics section.
func (l *loader) schemas(c *Config, s *spec) map[string]*ingest.Schema {
	out := ingest.DefaultSchemas()
	for _, t := range s.topics {
		sc := out[t.name]
		if sc == nil {
			sc = &ingest.Schema{IDField: "id", TSField: "ts", MaxIDLen: ingest.DefaultMaxIDLen,
				MaxKeyLen: ingest.DefaultMaxKeyLen, MinTime: ingest.DefaultMinTime()}
			out[t.name] = sc
		}
		if t.id != "" {
			sc.IDField = t.id
		}
		if t.ts != "" {
			sc.TSField = t.ts
		}
		for _, lim := range []struct {
			key      string
			src, dst *int
		}{{"max_id_len", &t.maxIDLen, &sc.MaxIDLen}, {"max_key_len", &t.maxKeyLen, &sc.MaxKeyLen}} {
			p := join(t.path, lim.key)
			switch {
			case !l.has(p):
			case *lim.src < 1:
				l.errorf(p, "must be at least 1, got %d", *lim.src)
			default:
				*lim.dst = *lim.src
			}
		}
		if l.has(join(t.path, "min_time")) {
			sc.MinTime = t.minTime
		}
		// A field named like the new id or ts field gives way to it.
		sc.Fields = slices.DeleteFunc(sc.Fields, func(f ingest.Field) bool {
			return f.Name == sc.IDField || f.Name == sc.TSField
		})
		for _, f := range t.fields {
			if i := slices.IndexFunc(sc.Fields, func(g ingest.Field) bool { return g.Name == f.Name }); i >= 0 {
				sc.Fields[i] = f
			} else {
				sc.Fields = append(sc.Fields, f)
			}
		}
		if err := sc.Validate(); err != nil {
			for _, e := range unjoin(err) {
				l.errorf(t.path, "%v", e)
			}
		}
	}
	for _, sc := range out {
		sc.MaxBytes = c.Kafka.MaxMessageBytes
		sc.FutureSkew = c.Kafka.FutureSkew
	}
	return out
}

// unjoin splits an errors.Join error.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
