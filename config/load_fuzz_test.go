package config_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// fuzzBase is a minimal valid config (config_test.go's base).
const fuzzBase = `kafka: {brokers: ["localhost:9092"]}
redis: {addr: "localhost:6379"}
boards:
  - name: b
    every: 1d
routes:
  - topic: gift
    member: anchor_id
    boards: [b]
`

// fuzzConfigSeeds are valid configs and near misses: the example and
// edits of it, the base and edits of it, YAML syntax errors, anchors and
// merges.
func fuzzConfigSeeds() []string {
	ex := string(config.Example())
	base := func(old, new string) string { return strings.Replace(fuzzBase, old, new, 1) }
	seeds := []string{
		// The example (large: most seeds are small, so that the fuzzer
		// runs fast) and two near misses of it.
		ex,
		strings.Replace(ex, "    <<: *shanghai", "    <<: *nowhere", 1),
		ex[:len(ex)/2],
		fuzzBase,
		base("every: 1d", "every: 2d"),
		base("every: 1d", "every: 1d\n    window: rolling\n    periods: 0"),
		base("every: 1d", "every: 1d\n    keep_top: -1"),
		base("boards: [b]", "boards: [b, b]"),
		base(`redis: {addr: "localhost:6379"}`, `redis: {addrs: [h1:7000, h2:7000]}`),
		base("every: 1d", "every: 1d\n    window: rolling\n    periods: 7\n    tiebreak: first\n    tie_unit: 1ms"),
		base("every: 1d", "window: total\n    tiebreak: last\n    tie_epoch: 2025-06-01T00:00:00+08:00\n    tie_horizon: 52w"),
		base("every: 1d", "window: total\n    tiebreak: first\n    tie_unit: 1ms\n    tie_horizon: 15000w"),
		base("every: 1d", "every: 1d\n    aggregate: max\n    tiebreak: first\n    sort:\n      - {field: a, bits: 20}\n      - {field: b, bits: 10, order: asc}") +
			"    sort: {a: coins, b: count}\n",
		base("every: 1d", "every: 1d\n    dims: [zone, room_id]\n    decimals: 2\n    retention: 3d\n    grace: 1h\n    timezone: Asia/Shanghai\n    week_start: sunday"),
		base("every: 1d", "window: total\n    base: true\n    keep_top: 100") + "    base: coins\n    when: 'gift_id == \"x\"'\n",
		fuzzBase + "topics:\n  clicks:\n    id: cid\n    max_id_len: 16\n    min_time: 2025-01-01\n    fields:\n      page: {type: string, required: true, max_len: 64}\n      n: {type: int, min: 0, max: 10, default: 1}\n",
		base("kafka: {brokers", "kafka: {topics: [gift, clicks], workers: 0, brokers"),
		base(`redis: {addr: "localhost:6379"}`, `redis: {addr: "localhost:6379", prefix: "a:b{", db: -1}`),
		"x-s: &s {every: 1d, tiebreak: first}\n" + base("every: 1d", "<<: *s"),
		"x-s: &s {every: 1d}\nx-t: &t {<<: *s, order: asc}\n" + base("every: 1d", "<<: [*t, *s]\n    every: 1w"),
		"kafka:\n\tbrokers: [a]\n",
		"a: 'x\nb: 2\n",
		"kafka: {brokers: [a], b: ]\n",
		"- oops\n",
		"",
		"---\na: 1\n---\nb: 2\n",
		"http: {listen: \"\"}\r\nrollover: {lead: 0}\r\n",
	}
	return seeds
}

var fuzzEnv = []string{"RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", "RANKD_REDIS_PASSWORD", "RANKD_HTTP_LISTEN"}

// FuzzLoadBytes loads arbitrary bytes as a config. LoadBytes must not
// panic and must be deterministic (same errors, or the same config, on a
// second load). An error is a list of *config.Error sorted by position,
// each naming the file, with a line (and column) inside the file or none,
// each reported once; a YAML syntax error has a line and a column. A
// loaded config is consistent: its boards have valid names and codecs and
// pass store.New (with a client that is never contacted), its routes
// compile, its topics have schemas. The seeds run in the default suite;
// explore with
//
//	go test ./config -run '^$' -fuzz '^FuzzLoadBytes$' -fuzztime 1m
func FuzzLoadBytes(f *testing.F) {
	for _, k := range fuzzEnv {
		f.Setenv(k, "") // the environment overrides nothing
	}
	for _, s := range fuzzConfigSeeds() {
		f.Add([]byte(s))
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	f.Cleanup(func() { rdb.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "fuzz.yaml"
		c, err := config.LoadBytes(name, data)
		c2, err2 := config.LoadBytes(name, data)
		if fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("LoadBytes is not deterministic:\n%v\n--- then ---\n%v", err, err2)
		}
		if err != nil {
			if c != nil {
				t.Fatalf("LoadBytes returned a config and the error %v", err)
			}
			checkLoadErrors(t, name, data, err)
			return
		}
		if d1, d2 := dumpConfig(c), dumpConfig(c2); d1 != d2 {
			t.Fatalf("LoadBytes is not deterministic:\n%s\n--- then ---\n%s", d1, d2)
		}
		checkLoaded(t, name, c, rdb)
	})
}

// maxLine is the largest line number a position in data can have: line
// breaks counted as YAML does (\n, \r\n, \r, NEL, LS, PS).
func maxLine(data []byte) int {
	n := 1 + bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) - bytes.Count(data, []byte("\r\n"))
	for _, br := range []string{"\u0085", "\u2028", "\u2029"} {
		n += bytes.Count(data, []byte(br))
	}
	return n
}

func checkLoadErrors(t *testing.T, name string, data []byte, err error) {
	t.Helper()
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T %v is not a list of *config.Error", err, err)
	}
	errs := j.Unwrap()
	lines, runes := maxLine(data), utf8.RuneCount(data)
	seen := map[config.Error]bool{}
	var prev *config.Error
	for _, e := range errs {
		ce, ok := e.(*config.Error)
		switch {
		case !ok:
			t.Fatalf("error %T %v is not a *config.Error", e, e)
		case ce.File != name || !strings.HasPrefix(ce.Error(), name+":"):
			t.Fatalf("error %q does not name the file %q", ce, name)
		case ce.Msg == "":
			t.Fatalf("error %q has no message", ce)
		case ce.Line < 0 || ce.Line > lines || ce.Column < 0 || ce.Column > runes+1 || ce.Line == 0 && ce.Column != 0:
			t.Fatalf("error %q at line %d column %d: outside the file's %d lines and %d characters", ce, ce.Line, ce.Column, lines, runes)
		case prev != nil && (ce.Line < prev.Line || ce.Line == prev.Line && ce.Column < prev.Column):
			t.Fatalf("errors not sorted by position: %q before %q", prev, ce)
		case seen[*ce]:
			t.Fatalf("error %q reported twice (%d errors from %d bytes)", ce, len(errs), len(data))
		}
		seen[*ce] = true
		prev = ce
	}
	var doc yaml.Node
	if yerr := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); yerr != nil && !errors.Is(yerr, io.EOF) {
		if len(errs) != 1 || prev.Line == 0 || prev.Column == 0 {
			t.Fatalf("YAML syntax error %q reported as %d errors, the last at line %d column %d: %v", yerr, len(errs), prev.Line, prev.Column, err)
		}
	}
}

var fuzzBoardName = regexp.MustCompile(`^[a-z0-9_]+$`)

func checkLoaded(t *testing.T, name string, c *config.Config, rdb redis.UniversalClient) {
	t.Helper()
	if c.File != name {
		t.Fatalf("File = %q, want %q", c.File, name)
	}
	names := map[string]bool{}
	for _, b := range c.Boards() {
		if !fuzzBoardName.MatchString(b.Name) || names[b.Name] {
			t.Fatalf("board name %q invalid or repeated", b.Name)
		}
		names[b.Name] = true
		if b.Location == nil || b.Grace < 0 || b.Retention < 0 || b.KeepTop < 0 || b.Decimals < 0 {
			t.Fatalf("board %q: %+v", b.Name, b)
		}
		if _, err := ranking.NewCodec(b); err != nil {
			t.Fatalf("board %q: %v", b.Name, err)
		}
		if bn, dims, err := store.ParseTag(store.Tag(b.Name, nil)); err != nil || bn != b.Name || dims != nil {
			t.Fatalf("board %q: tag %q parses as %q, %q, %v", b.Name, store.Tag(b.Name, nil), bn, dims, err)
		}
	}
	st, err := store.New(rdb, c.Boards(), store.WithPrefix(c.Redis.Prefix), store.WithDedupeTTL(c.Redis.DedupeTTL))
	if err != nil {
		t.Fatalf("store.New refuses the loaded boards: %v", err)
	}
	for _, b := range c.Boards() {
		if _, ok := st.Codec(b.Name); !ok {
			t.Fatalf("store has no board %q", b.Name)
		}
	}
	if _, err := c.Router(); err != nil {
		t.Fatalf("Router: %v", err)
	}
	if len(c.Routes) == 0 || len(c.Kafka.Brokers) == 0 || (c.Redis.Addr == "") == (len(c.Redis.Addrs) == 0) {
		t.Fatalf("loaded without routes, brokers or exactly one of redis addr and addrs: %d routes, kafka %+v, redis addr %q addrs %q",
			len(c.Routes), c.Kafka.Brokers, c.Redis.Addr, c.Redis.Addrs)
	}
	for _, topic := range c.Kafka.Topics {
		if c.Schemas()[topic] == nil || topic == c.Kafka.DeadLetterTopic {
			t.Fatalf("consumed topic %q has no schema or is the dead-letter topic", topic)
		}
	}
}

// dumpConfig renders c, to compare two loads (boards' locations by name;
// the password left out).
func dumpConfig(c *config.Config) string {
	var sb strings.Builder
	r := c.Redis
	r.Password = config.Secret(fmt.Sprintf("(%d bytes)", len(r.Password)))
	fmt.Fprintf(&sb, "%q\n%+v\n%+v\n%+v\n%+v\n%+v\n", c.File, c.Kafka, r, c.HTTP, c.Rollover, c.Routes)
	for _, b := range c.Boards() {
		cb := *b
		cb.Location = nil
		fmt.Fprintf(&sb, "board %+v in %v\n", cb, b.Location)
	}
	schemas := c.Schemas()
	for _, k := range slices.Sorted(maps.Keys(schemas)) {
		fmt.Fprintf(&sb, "schema %q %+v\n", k, *schemas[k])
	}
	return sb.String()
}
