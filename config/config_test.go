package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

func TestExample(t *testing.T) {
	c, err := LoadBytes("example.yaml", Example())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range c.Boards() {
		names = append(names, b.Name)
	}
	want := []string{"anchor_hot_30m", "anchor_hot_zone_30m", "anchor_luck_day", "anchor_luck_total",
		"user_rich_room_day", "anchor_7d", "anchor_likes_day", "hot_news", "anchor_total"}
	if !slices.Equal(names, want) {
		t.Fatalf("boards %v, want %v", names, want)
	}
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	b7 := c.Board("anchor_7d")
	if b7.Window != ranking.WindowRolling || b7.Periods != 7 || b7.Location.String() != shanghai.String() ||
		b7.Retention != 8*25*time.Hour+5*time.Minute || b7.Grace != 5*time.Minute {
		t.Errorf("anchor_7d = %+v", b7)
	}
	if b := c.Board("anchor_hot_30m"); b.Retention != time.Hour+5*time.Minute || b.Tiebreak != ranking.TieFirst || b.Every.String() != "30m" {
		t.Errorf("anchor_hot_30m = %+v", b)
	}
	if b := c.Board("hot_news"); !b.HasBase || b.KeepTop != 1000 || b.Retention != 0 || b.Location != time.UTC {
		t.Errorf("hot_news = %+v", b)
	}
	if c.Kafka.Workers != 2 || c.Kafka.Batch.Linger != 20*time.Millisecond || c.Redis.DedupeTTL != 24*time.Hour ||
		c.Rollover.Lead != 10*time.Minute || c.Kafka.MinBytes != 1 || c.HTTP.Listen != ":8080" {
		t.Errorf("sections = %+v %+v %+v", c.Kafka, c.Redis, c.Rollover)
	}
	if s := c.Schemas()["like"]; s.MaxBytes != 1<<20 || s.FutureSkew != time.Minute {
		t.Errorf("like schema limits = %d, %v", s.MaxBytes, s.FutureSkew)
	}

	// The example routes the design's events.
	r, err := c.Router()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s := c.Schemas()["gift"]
	s.Now = func() time.Time { return now }
	ev, err := s.Decode("gift", 0, 1, []byte(`{"id":"g","ts":1763700000000,"anchor_id":"a","user_id":"u","room_id":"r","zone":"z","gift_id":"ice_castle","count":1,"coins":100}`), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	ups, err := r.Route(ev)
	if err != nil {
		t.Fatal(err)
	}
	var boards []string
	for _, u := range ups {
		boards = append(boards, u.Board)
	}
	if want := []string{"anchor_luck_day", "anchor_luck_total", "anchor_hot_30m", "anchor_hot_zone_30m", "anchor_7d", "anchor_total", "user_rich_room_day"}; !slices.Equal(boards, want) {
		t.Errorf("gift routed to %v, want %v", boards, want)
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rankd.yaml")
	if err := os.WriteFile(path, Example(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
}

// base is a minimal valid config; cases edit it with replacements so that
// their line numbers stay obvious.
const base = `kafka: {brokers: ["localhost:9092"]}
redis: {addr: "localhost:6379"}
boards:
  - name: b
    every: 1d
routes:
  - topic: gift
    member: anchor_id
    boards: [b]
`

func TestBase(t *testing.T) {
	c, err := LoadBytes("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Kafka.Topics; !slices.Equal(got, []string{"gift"}) {
		t.Errorf("default kafka.topics = %v", got)
	}
	if b := c.Board("b"); b.Window != ranking.WindowPeriodic || b.Retention != 50*time.Hour+5*time.Minute {
		t.Errorf("board = %+v", b)
	}
	if c.Redis.CallUpdates != 1000 {
		t.Errorf("default redis.call_updates = %d, want 1000", c.Redis.CallUpdates)
	}
}

func TestBrokenConfigs(t *testing.T) {
	tests := []struct {
		name     string
		old, new string // replace old by new in base ("" old: append new)
		want     string // expected prefix of the first error
	}{
		{"unknown top key", "", "kafak: {}\n", `t.yaml:10:1: kafak: unknown key "kafak" (want api, boards, http, kafka, redis, rollover, routes, standings, topics)`},
		{"unknown board key", "every: 1d", "evry: 1d", `t.yaml:5:5: boards[0].evry: unknown key "evry"`},
		{"unknown route key", "member: anchor_id", "membr: anchor_id", `t.yaml:8:5: routes[0].membr: unknown key "membr"`},
		{"duplicate key", "every: 1d", "every: 1d\n    every: 1w", `t.yaml:6:5: boards[0].every: duplicate key`},
		{"call_updates too small", `addr: "localhost:6379"`, `addr: "localhost:6379", call_updates: 10`, `t.yaml:2:47: redis.call_updates: must be 50 to 10000, got 10`},
		{"call_updates too large", `addr: "localhost:6379"`, `addr: "localhost:6379", call_updates: 20000`, `t.yaml:2:47: redis.call_updates: must be 50 to 10000, got 20000`},
		{"bad unit", "every: 1d", "every: 2d", `t.yaml:5:12: boards[0].every: invalid period unit "2d"`},
		{"bad type", "kafka: {brokers", "kafka: {workers: many, brokers", `t.yaml:1:18: kafka.workers: want an integer, got "many"`},
		{"list for a scalar", "every: 1d", "every: [1d]", `t.yaml:5:12: boards[0].every: want a single value, got a list`},
		{"unknown board in route", "boards: [b]", "boards: [b, nope]", `t.yaml:9:17: routes[0].boards[1]: unknown board "nope"`},
		{"duplicate board", "routes:", "  - name: b\n    every: 1w\nroutes:", `t.yaml:6:11: boards[1].name: duplicate board name "b" (first declared at line 4)`},
		{"bad board name", "name: b\n", "name: Hot-B\n", `t.yaml:4:11: boards[0].name: board name "Hot-B" must match [a-z0-9_]+`},
		{"missing board name", "  - name: b\n    every", "  - every", `t.yaml:4:5: boards[0]: missing name`},
		{"expression does not compile", "member: anchor_id", "member: anchor_id\n    when: 'gift_idd == \"x\"'", `t.yaml:9:11: routes[0].when: "gift_idd == \"x\"": unknown name gift_idd`},
		{"when not bool", "member: anchor_id", "member: anchor_id\n    when: coins", `t.yaml:9:11: routes[0].when: "coins": expected bool`},
		{"score not numeric", "member: anchor_id", "member: anchor_id\n    score: zone", `t.yaml:9:12: routes[0].score: "zone": want a number, got string`},
		{"missing member", "    member: anchor_id\n", "", `t.yaml:7:5: routes[0].member: missing member expression`},
		{"unknown topic", "topic: gift", "topic: gifts", `t.yaml:7:12: routes[0].topic: no schema for topic "gifts"`},
		{"dims not in topic", "every: 1d", "every: 1d\n    dims: [news_id]", `t.yaml:10:14: routes[0].boards[0]: board "b": dims field "news_id" is not a field of topic "gift"`},
		{"bad timezone", "every: 1d", "every: 1d\n    timezone: Mars/Olympus", `t.yaml:6:15: boards[0].timezone: unknown time zone "Mars/Olympus"`},
		{"local timezone", "every: 1d", "every: 1d\n    timezone: Local", `t.yaml:6:15: boards[0].timezone: unknown time zone "Local"`},
		{"sort too wide", "every: 1d", "every: 1d\n    aggregate: max\n    tiebreak: first\n    sort:\n      - {field: a, bits: 30}\n      - {field: b, bits: 10, order: asc}",
			`t.yaml:9:7: boards[0].sort: sort key needs 30+10=40 bits plus 17 tie bits, only 53 fit in a double`},
		{"rolling max", "every: 1d", "every: 1d\n    window: rolling\n    periods: 7\n    aggregate: max", `t.yaml:8:16: boards[0].aggregate: a rolling board must use aggregate sum, got max`},
		{"rolling without periods", "every: 1d", "every: 1d\n    window: rolling", `t.yaml:6:13: boards[0].periods: board "b" is rolling but has no periods: add "periods: N" to it, for a window of the last N periods of every (e.g. every: 1d with periods: 7 for the last 7 days)`},
		{"periodic without every", "every: 1d", "window: periodic", `t.yaml:4:5: boards[0].every: a periodic board needs every`},
		{"total with every", "every: 1d", "every: 1d\n    window: total", `t.yaml:5:12: boards[0].every: every is only for periodic and rolling boards`},
		{"keep_top lowering", "every: 1d", "every: 1d\n    aggregate: last\n    keep_top: 10", `t.yaml:7:15: boards[0].keep_top: keep_top needs updates that never lower a member`},
		{"keep_top tiebreak last", "every: 1d", "every: 1d\n    tiebreak: last\n    keep_top: 10", `t.yaml:7:15: boards[0].keep_top: keep_top needs`},
		{"keep_top min desc", "every: 1d", "every: 1d\n    aggregate: min\n    keep_top: 10", `t.yaml:7:15: boards[0].keep_top: keep_top needs`},
		{"keep_top rolling", "every: 1d", "every: 1d\n    window: rolling\n    periods: 3\n    keep_top: 10", `t.yaml:8:15: boards[0].keep_top: keep_top does not work on rolling boards`},
		{"base on max", "every: 1d", "every: 1d\n    aggregate: max\n    base: true", `t.yaml:7:11: boards[0].base: base needs a periodic or total board with aggregate sum`},
		{"base on rolling", "every: 1d", "every: 1d\n    window: rolling\n    periods: 2\n    base: true", `t.yaml:8:11: boards[0].base: base needs`},
		{"route base without board base", "member: anchor_id", "member: anchor_id\n    base: coins", `t.yaml:9:11: routes[0].base: board "b" does not take a base`},
		{"retention below grace", "every: 1d", "every: 1d\n    grace: 10m\n    retention: 5m", `t.yaml:7:16: boards[0].retention: retention 5m0s is shorter than grace 10m0s`},
		{"rolling retention too short", "every: 1d", "every: 1d\n    window: rolling\n    periods: 7\n    retention: 7d", `t.yaml:8:16: boards[0].retention: a rolling board of 7 × 1d needs a retention of at least 200h0m0s`},
		{"retention on total", "every: 1d", "window: total\n    retention: 7d", `t.yaml:6:16: boards[0].retention: total boards never expire`},
		{"bad duration", "every: 1d", "every: 1d\n    grace: soon", `t.yaml:6:12: boards[0].grace: invalid duration "soon"`},
		{"redis prefix with colon", `redis: {addr: "localhost:6379"}`, `redis: {addr: "localhost:6379", prefix: "a:b"}`, `t.yaml:2:41: redis.prefix: prefix "a:b" must be non-empty without '{', '}' or ':'`},
		{"redis prefix with brace", `redis: {addr: "localhost:6379"}`, `redis: {addr: "localhost:6379", prefix: "a{"}`, `t.yaml:2:41: redis.prefix: prefix "a{"`},
		{"no redis", `redis: {addr: "localhost:6379"}`, `redis: {db: 1}`, `t.yaml:2:8: redis.addr: no address`},
		{"kafka topic without schema", `kafka: {brokers: ["localhost:9092"]}`, `kafka: {brokers: ["localhost:9092"], topics: [gift, clicks]}`, `t.yaml:1:53: kafka.topics[1]: topic "clicks" has no schema`},
		{"route topic not consumed", `kafka: {brokers: ["localhost:9092"]}`, `kafka: {brokers: ["localhost:9092"], topics: [like]}`, `t.yaml:1:47: kafka.topics[0]: topic "like" has no route`},
		{"bad broker", `["localhost:9092"]`, `["localhost"]`, `t.yaml:1:19: kafka.brokers[0]: broker "localhost" is not host:port`},
		{"bad field type", "", "topics:\n  gift:\n    fields:\n      vip: integer\n", `t.yaml:13:12: topics.gift.fields.vip.type: unknown field type "integer"`},
		{"bad field default", "", "topics:\n  gift:\n    fields:\n      vip: {type: int, default: high}\n", `t.yaml:13:33: topics.gift.fields.vip.default: "high" is not a valid int`},
		{"bad enum", "every: 1d", "every: 1d\n    order: up", `t.yaml:6:12: boards[0].order: unknown value "up" (want desc, asc)`},
		{"decimals", "every: 1d", "every: 1d\n    decimals: 19", `t.yaml:6:15: boards[0].decimals: must be in [0, 18], got 19`},
		{"tie_epoch on periodic", "every: 1d", "every: 1d\n    tie_epoch: 2025-01-01", `t.yaml:6:16: boards[0].tie_epoch: tie_epoch is only for total boards`},
		{"syntax error", "boards:\n", "boards:\n  - name: [\n", `t.yaml:`},
		{"not a mapping", base, "- oops\n", `t.yaml:1: the config must be a mapping`},
		{"empty", base, "", `t.yaml: empty config`},
		{"empty document", base, "---\n", `t.yaml: empty config`},
		{"negative cache refresh", "", "api: {cache_refresh: -1s}\n", `t.yaml:10:22: api.cache_refresh: must be 0 (the TTL alone) or positive, got -1s`},
		{"merge cycle", `redis: {addr: "localhost:6379"}`, `redis: &r {addr: "localhost:6379", <<: *r}`, `t.yaml:2:40: redis: merge key (<<) merges the mapping into itself`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := base + tt.new
			if tt.old != "" {
				if !strings.Contains(base, tt.old) {
					t.Fatalf("base has no %q", tt.old)
				}
				src = strings.Replace(base, tt.old, tt.new, 1)
			}
			_, err := LoadBytes("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("config accepted:\n%s", src)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			if !strings.HasPrefix(first, tt.want) {
				t.Fatalf("first error\n got %s\nwant %s...\nall errors:\n%v\nconfig:\n%s", first, tt.want, err, src)
			}
		})
	}
}

func TestAllErrorsSortedByLine(t *testing.T) {
	src := `kafka: {brokers: ["localhost:9092"], workers: 0}
redis: {addr: "localhost:6379", prefix: "x:y"}
boards:
  - name: b
    every: 2d
  - name: B
    window: rolling
    every: 1d
    periods: 7
    aggregate: max
routes:
  - topic: gift
    member: nope
    boards: [b, c]
`
	_, err := LoadBytes("t.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	var lines []string
	for _, e := range unjoin(err) {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not an *Error", e)
		}
		lines = append(lines, strings.SplitN(ce.Error(), ":", 4)[1])
	}
	want := []string{"1", "2", "5", "6", "10", "13", "14"}
	if !slices.Equal(lines, want) {
		t.Fatalf("error lines %v, want %v:\n%v", lines, want, err)
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Setenv(EnvKafkaBrokers, "k1:9092, k2:9092")
	t.Setenv(EnvRedisAddrs, "r1:7000,r2:7000")
	t.Setenv(EnvRedisPassword, "s3cret")
	t.Setenv(EnvHTTPListen, "127.0.0.1:9000")
	c, err := LoadBytes("example.yaml", Example())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Kafka.Brokers, []string{"k1:9092", "k2:9092"}) || c.Redis.Addr != "" ||
		!slices.Equal(c.Redis.Addrs, []string{"r1:7000", "r2:7000"}) || !c.Redis.Cluster() ||
		c.Redis.Password != "s3cret" || c.HTTP.Listen != "127.0.0.1:9000" {
		t.Fatalf("overrides not applied: %+v %+v %+v", c.Kafka, c.Redis, c.HTTP)
	}

	t.Setenv(EnvRedisAddr, "r0:6379")
	if _, err := LoadBytes("example.yaml", Example()); err == nil || !strings.Contains(err.Error(), "both RANKD_REDIS_ADDR and RANKD_REDIS_ADDRS") {
		t.Fatalf("both redis env vars: err = %v", err)
	}
	t.Setenv(EnvRedisAddrs, "")
	c, err = LoadBytes("example.yaml", Example())
	if err != nil || c.Redis.Addr != "r0:6379" || c.Redis.Cluster() {
		t.Fatalf("RANKD_REDIS_ADDR: %+v, %v", c.Redis, err)
	}
}

func TestTopicsOverride(t *testing.T) {
	src := base + `topics:
  gift:
    id: msg_id
    fields:
      vip: int
      coins: {type: float}
      badge: {type: string, required: true, default: none}
  clicks:
    ts: at
    fields:
      page: string
`
	src = strings.Replace(src, "member: anchor_id", "member: anchor_id\n    when: vip > 2 && badge != \"\"\n    score: coins * 1.5", 1)
	c, err := LoadBytes("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	gift := c.Schemas()["gift"]
	if gift.IDField != "msg_id" {
		t.Errorf("gift id field = %q", gift.IDField)
	}
	for name, want := range map[string]ingest.FieldType{"vip": ingest.TypeInt, "coins": ingest.TypeFloat, "badge": ingest.TypeString, "zone": ingest.TypeString, "msg_id": ingest.TypeString} {
		if got, ok := gift.Field(name); !ok || got != want {
			t.Errorf("gift field %s = %v, %v; want %v", name, got, ok, want)
		}
	}
	if clicks := c.Schemas()["clicks"]; clicks.TSField != "at" || len(clicks.Fields) != 1 {
		t.Errorf("clicks schema = %+v", clicks)
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"0": 0, "90s": 90 * time.Second, "7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1h30m": 90 * time.Minute} {
		if got, err := parseDuration(s); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1y", "d", "-1d7"} {
		if _, err := parseDuration(s); err == nil {
			t.Errorf("parseDuration(%q) succeeded", s)
		}
	}
}

// TestDefaultRetention checks the retention a board gets when the file gives
// none: it always covers the grace (issue 12: a 30m board with grace 72h got
// 1h, so its periods expired while they still accepted events), and it is
// what the store uses (ranking.Board.DefaultRetention).
func TestDefaultRetention(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		want           time.Duration
	}{
		{"30m, grace 72h: 2 periods + grace", "every: 1d", "every: 30m\n    grace: 72h", 73 * time.Hour},
		{"1d, default grace", "every: 1d", "every: 1d", 50*time.Hour + 5*time.Minute},
		{"1w, grace 2d", "every: 1d", "every: 1w\n    grace: 2d", 2*169*time.Hour + 48*time.Hour},
		{"1mo, grace 0", "every: 1d", "every: 1mo\n    grace: 0s", 2 * 745 * time.Hour},
		{"rolling 3 × 30m, grace 72h", "every: 1d", "every: 30m\n    window: rolling\n    periods: 3\n    grace: 72h", 2*time.Hour + 72*time.Hour},
		{"total", "every: 1d", "window: total", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadBytes("t.yaml", []byte(strings.Replace(base, tt.old, tt.new, 1)))
			if err != nil {
				t.Fatal(err)
			}
			b := c.Board("b")
			if b.Retention != tt.want || b.DefaultRetention() != tt.want {
				t.Fatalf("retention %v (DefaultRetention %v), want %v", b.Retention, b.DefaultRetention(), tt.want)
			}
			// The default is a retention the loader accepts when written out.
			if b.Window != ranking.WindowTotal {
				src := strings.Replace(base, tt.old, tt.new+"\n    retention: "+b.Retention.String(), 1)
				if _, err := LoadBytes("t.yaml", []byte(src)); err != nil {
					t.Fatalf("the default written out is refused: %v", err)
				}
			}
		})
	}
	// An explicit retention shorter than the grace is still refused.
	src := strings.Replace(base, "every: 1d", "every: 30m\n    grace: 72h\n    retention: 1h", 1)
	if _, err := LoadBytes("t.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "retention 1h0m0s is shorter than grace 72h0m0s") {
		t.Fatalf("retention 1h with grace 72h: err = %v", err)
	}
}

// TestEveryErrorOfABoard checks that every error of a board is reported,
// each once (issue 11: the name error of a board that failed to decode was
// hidden, and a rolling board without periods was reported twice).
func TestEveryErrorOfABoard(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		want           []string // every error, in order
	}{
		{"bad name and bad every", "name: b\n    every: 1d", "name: Hot-B\n    every: 2d", []string{
			`t.yaml:4:11: boards[0].name: board name "Hot-B" must match [a-z0-9_]+`,
			`t.yaml:5:12: boards[0].every: invalid period unit "2d": want whole minutes or hours below a day ("30m", "90m", "1h", "12h"), "1d" (or "24h"), "1w" or "1mo"`,
		}},
		{"bad name and bad window", "name: b\n", "name: Hot-B\n    window: sometimes\n", []string{
			`t.yaml:4:11: boards[0].name: board name "Hot-B" must match [a-z0-9_]+`,
			`t.yaml:5:13: boards[0].window: unknown value "sometimes" (want total, periodic, rolling)`,
		}},
		{"bad name and keep_top on rolling", "name: b\n    every: 1d", "name: Hot-B\n    every: 1d\n    window: rolling\n    periods: 3\n    keep_top: 10", []string{
			`t.yaml:4:11: boards[0].name: board name "Hot-B" must match [a-z0-9_]+`,
			`t.yaml:8:15: boards[0].keep_top: keep_top does not work on rolling boards (members fall as periods leave the window)`,
		}},
		{"missing name and bad every", "name: b\n    every: 1d", "every: 2d", []string{
			`t.yaml:4:5: boards[0]: missing name`,
			`t.yaml:4:12: boards[0].every: invalid period unit "2d": want whole minutes or hours below a day ("30m", "90m", "1h", "12h"), "1d" (or "24h"), "1w" or "1mo"`,
			`t.yaml:8:14: routes[0].boards[0]: unknown board "b"`,
		}},
		{"name that does not decode", "name: b\n", "name: [b]\n", []string{
			`t.yaml:4:11: boards[0].name: want a single value, got a list`,
			`t.yaml:9:14: routes[0].boards[0]: unknown board "b"`,
		}},
		{"rolling without periods", "every: 1d", "every: 1d\n    window: rolling", []string{
			`t.yaml:6:13: boards[0].periods: board "b" is rolling but has no periods: add "periods: N" to it, for a window of the last N periods of every (e.g. every: 1d with periods: 7 for the last 7 days)`,
		}},
		{"rolling without periods nor every", "every: 1d", "window: rolling", []string{
			`t.yaml:4:5: boards[0].every: a rolling board needs every (30m, 1h, ..., 1d, 1w, 1mo)`,
			`t.yaml:5:13: boards[0].periods: board "b" is rolling but has no periods: add "periods: N" to it, for a window of the last N periods of every (e.g. every: 1d with periods: 7 for the last 7 days)`,
		}},
		{"periodic without every", "every: 1d", "window: periodic", []string{
			`t.yaml:4:5: boards[0].every: a periodic board needs every (30m, 1h, ..., 1d, 1w, 1mo)`,
		}},
		{"rolling without periods, sort too wide", "every: 1d", "every: 1d\n    window: rolling\n    sort:\n      - {field: a, bits: 30}\n      - {field: c, bits: 30}", []string{
			`t.yaml:6:13: boards[0].periods: board "b" is rolling but has no periods: add "periods: N" to it, for a window of the last N periods of every (e.g. every: 1d with periods: 7 for the last 7 days)`,
			`t.yaml:8:7: boards[0].sort: multi-factor sort needs aggregate max, min or last, not sum`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.old) {
				t.Fatalf("base has no %q", tt.old)
			}
			src := strings.Replace(base, tt.old, tt.new, 1)
			if strings.Contains(tt.new, "Hot-B") {
				src = strings.Replace(src, "boards: [b]", "boards: [Hot-B]", 1)
			}
			_, err := LoadBytes("t.yaml", []byte(src))
			var got []string
			for _, e := range unjoin(err) {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q\nconfig:\n%s", got, tt.want, src)
			}
		})
	}
}

// TestExampleDocumentsEveryKey checks that example.yaml shows every key of
// the kafka, redis, http, api and rollover sections, set or in a comment (issue
// 11: kafka.min_bytes was accepted but undocumented).
func TestExampleDocumentsEveryKey(t *testing.T) {
	for _, tt := range []struct {
		section string
		want    string // the accepted keys, from the unknown-key error
	}{
		{"kafka", "batch, brokers, dead_letter_topic, future_skew, group, heartbeat_interval, max_message_bytes, max_wait, min_bytes, rebalance_timeout, sasl, session_timeout, shutdown_timeout, tls, topics, workers"},
		{"redis", "addr, addrs, call_updates, db, dedupe_ttl, password, password_file, pool_size, prefix, sentinel, tls, username"},
		{"http", "idle_timeout, listen, max_conns, max_header_bytes, metrics_listen, read_header_timeout, read_timeout, token, token_file, write_timeout"},
		{"api", "cache_max_bytes, cache_refresh, cache_ttl, concurrent_reads, concurrent_writes, redis_budget, yield_latency"},
		{"rollover", "interval, lead"},
	} {
		t.Run(tt.section, func(t *testing.T) {
			_, err := LoadBytes("t.yaml", []byte(tt.section+": {bogus: 1}\n"))
			m := regexp.MustCompile(`unknown key "bogus" \(want ([^)]*)\)`).FindStringSubmatch(fmt.Sprint(err))
			if m == nil || m[1] != tt.want {
				t.Fatalf("accepted keys: %v; want %s", err, tt.want)
			}
			// The section: from its line to the next top-level line.
			text := string(Example())
			i := strings.Index(text, "\n"+tt.section+":\n")
			if i < 0 {
				t.Fatalf("example.yaml has no %s section", tt.section)
			}
			text = text[i+1:]
			if j := regexp.MustCompile(`\n[^\s#]`).FindStringIndex(text[1:]); j != nil {
				text = text[:j[0]+1]
			}
			for key := range strings.SplitSeq(m[1], ", ") {
				if !regexp.MustCompile(`(?m)^\s+` + key + `:|#.*\b` + key + `:`).MatchString(text) {
					t.Errorf("example.yaml does not show %s.%s", tt.section, key)
				}
			}
		})
	}
}

// TestSharedLineReportedOnce: an error in a line that several boards take
// (a merge key) is reported once, naming the other boards' fields.
func TestSharedLineReportedOnce(t *testing.T) {
	src := strings.Replace(string(Example()), "\n  timezone: Asia/Shanghai\n", "\n  timezone: Asia/Shangai\n", 1)
	line := 2 + strings.Count(src[:strings.Index(src, "\n  timezone: Asia/Shangai\n")], "\n")
	_, err := LoadBytes("t.yaml", []byte(src))
	want := fmt.Sprintf("t.yaml:%d:13: ", line) + `boards[0].timezone: unknown time zone "Asia/Shangai" (want an IANA name such as UTC or Asia/Shanghai); ` +
		`also boards[1].timezone, boards[2].timezone, boards[4].timezone, boards[5].timezone, boards[6].timezone, which take this line`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
}
