package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

// The determinism and replay test. One log (3 topics x 6 partitions keyed by
// anchor, three days of events with disorder within a minute, truly late
// events, duplicates resent with the same key) is consumed into separate key
// prefixes, with the documented default grace (5m):
//
//	(a) by `rankd run` with 1 worker, started on the whole backlog;
//	(b) by `rankd run` with 4 workers and small random batches, killed with SIGKILL
//	    twice mid-stream and started again;
//	(d) by `rankd replay` into (a)'s prefix while (a) runs live and a
//	    producer keeps sending; the replay is killed three times first.
//
// Every board equals the oracle (which judges lateness per partition on its
// own) and the sets of late dead letters are the oracle's. Then
// `--boards NEW` fills a board added to the config without touching any
// other key, `--from TIME` rebuilds exactly the messages from that time,
// and `--dry-run` reports the oracle's late count. RANKD_REPLAY_SEED=N
// replays a run.
const (
	replayPartitions = 6
	replayEvents     = 12000 // in the log before the first consumer starts
	replayLive       = 3000  // produced during the replay
)

func testReplay(t *testing.T, bin string) {
	seed := time.Now().UnixNano() % 1e6
	if s := os.Getenv("RANKD_REPLAY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("RANKD_REPLAY_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with RANKD_REPLAY_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7e91a7))
	for _, k := range []string{"RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", "RANKD_REDIS_PASSWORD", "RANKD_HTTP_LISTEN"} {
		t.Setenv(k, "")
	}
	topics := []string{"gift", "like", "comment"}
	broker := testenv.StartBrokerProcess(t, testenv.BrokerProcessOptions{
		Topics: append(slices.Clone(topics), "dl-a", "dl-b", "dl-c"), Partitions: replayPartitions})
	rsrv := testenv.NewRedis(t, testenv.RedisOptions{})
	rdb := rsrv.Client(t)
	env := cleanEnv("")

	// The log: three days ending 3 hours ago, then the live tail.
	total := replayEvents + replayLive
	wl, err := workload.New(workload.Config{Seed: seed, Start: time.Now().Add(-75 * time.Hour).Truncate(time.Second),
		Step: 72 * time.Hour / time.Duration(total)})
	if err != nil {
		t.Fatal(err)
	}
	log := replayLogMessages(wl, rng, total)
	w := produce.NewWriter(broker.Addrs())
	t.Cleanup(func() { _ = w.Close() })
	ctx := ctxTimeout(t, 8*time.Minute)
	first := replayEvents * 6 / 10
	if err := w.WriteMessages(ctx, log[:first]...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // message timestamps before and after from are apart
	from := time.Now().Truncate(time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if err := w.WriteMessages(ctx, log[first:replayEvents]...); err != nil {
		t.Fatal(err)
	}

	port := func() string {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	type setup struct {
		path, listen, prefix, group, dlq string
		cfg                              *config.Config
	}
	mk := func(name string, workers, batch int, extra string) setup {
		s := setup{listen: port(), prefix: "r" + name, group: "g" + name, dlq: "dl-" + name}
		s.path = writeReplayConfig(t, name, broker.Addrs()[0], rsrv.Addr(), s.listen, s.prefix, s.group, s.dlq, workers, batch, extra)
		if s.cfg, err = config.Load(s.path); err != nil {
			t.Fatal(err)
		}
		return s
	}
	batchB := 17 + rng.IntN(200)
	t.Logf("(b) batches of %d", batchB)
	a, b := mk("a", 1, 1000, ""), mk("b", 4, batchB, "")
	runArgs := func(s setup) []string {
		return []string{"run", "--config", s.path, "--log-format", "text", "--log-level", "warn",
			"--session-timeout", "1s", "--heartbeat-interval", "100ms", "--rebalance-timeout", "1s"}
	}
	drain := func(s setup, p *proc) {
		t.Helper()
		lag := newLagReader(t, broker.Addrs(), s.group, topics)
		start := time.Now()
		for {
			if c, end := lag.totals(); c == end && end > 0 {
				break
			}
			if p.exited() {
				t.Fatalf("rankd run exited while draining (%v):\n%s", p.err, p.out.tail(40))
			}
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("not drained after 2 minutes:\n%s", p.out.tail(40))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect := func(cfg *config.Config, apply func(oracle.LogMessage) bool) oracle.LogResult {
		t.Helper()
		router, err := cfg.Router()
		if err != nil {
			t.Fatal(err)
		}
		l := oracle.Log{Schemas: cfg.Schemas(), Router: router, Apply: apply}
		return l.FromLog(cfg.Boards(), testenv.ReadLog(t, broker.Addrs(), topics...))
	}

	// (a) one worker, on the whole backlog, default grace.
	pa := startRankd(t, bin, env, runArgs(a)...)
	drain(a, pa)
	want := expect(a.cfg, nil)
	if want.Messages != replayEvents {
		t.Fatalf("the log holds %d messages, want %d", want.Messages, replayEvents)
	}
	late := lateSet(want.Rejected)
	t.Logf("log: %d messages, %d updates applied, %d messages late for some board, %d invalid", want.Messages, want.Applied, len(late), len(want.Invalid))
	if len(late) == 0 {
		t.Fatal("the log has no late message: the test proves less than it should")
	}
	compareStore(t, a.cfg, rdb, want.Oracle, nil, "(a) live, 1 worker")
	checkLateLetters(t, broker.Addrs(), a.dlq, late, "(a)", want.Explain)

	// (b) four workers, small batches, two SIGKILLs.
	for cycle := 0; cycle < 2; cycle++ {
		p := startRankd(t, bin, env, runArgs(b)...)
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		p.kill()
	}
	pb := startRankd(t, bin, env, runArgs(b)...)
	drain(b, pb)
	compareStore(t, b.cfg, rdb, want.Oracle, nil, "(b) live, 4 workers, killed twice")
	checkLateLetters(t, broker.Addrs(), b.dlq, late, "(b)", want.Explain)
	pb.kill()

	// --dry-run reports the oracle's late messages.
	out := runReplay(t, bin, env, "--config", a.path, "--dry-run", "--progress", "none")
	if got := dryRunCount(out, "late"); got != len(late) {
		t.Fatalf("dry run: %d late messages, want %d:\n%s", got, len(late), out)
	}
	if strings.Contains(out, "updates applied") || !strings.Contains(out, "  board updates that would be applied ") {
		t.Errorf("the dry run's summary says it applied updates:\n%s", out)
	}

	// (d) a replay into (a)'s prefix while (a) runs and the producer keeps
	// sending; three replays are killed first.
	gens := func() map[string]string {
		h, err := rdb.HGetAll(t.Context(), a.prefix+":gens").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for k, v := range h {
			if strings.HasPrefix(k, "a:") {
				out[k] = v
			}
		}
		return out
	}
	bg := make(chan error, 1)
	go func() {
		for i := replayEvents; i < total; i += 100 {
			if err := w.WriteMessages(ctx, log[i:min(i+100, total)]...); err != nil {
				bg <- err
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
		bg <- nil
	}()
	replayArgs := []string{"replay", "--config", a.path, "--yes", "--progress", "log", "--drop-after", "500ms",
		"--batch", "500", "--log-format", "text", "--lock-ttl", "2s", "--lock-wait", "20s"}
	// Kill points: random, most of them inside the replay (small batches,
	// one partition at a time, to make it last); one that lands after the
	// switch is allowed but must have switched everything.
	killed := 0
	for kill := 0; kill < 3; kill++ {
		before := gens()
		p := startRankd(t, bin, env, append(slices.Clone(replayArgs[:len(replayArgs)-4]), "--batch", "20", "--parallel", "1",
			"--lock-ttl", "2s", "--lock-wait", "20s")...)
		time.Sleep(time.Duration(50+rng.IntN(700)) * time.Millisecond)
		p.kill()
		g := gens()
		if strings.Contains(p.out.String(), "switched to the new generation") {
			t.Logf("kill %d landed after the switch", kill+1)
			continue
		}
		killed++
		if fmt.Sprint(g) != fmt.Sprint(before) {
			t.Fatalf("a killed replay changed the active generations: %v -> %v\n%s", before, g, p.out.tail(20))
		}
		t.Logf("kill %d: replay killed before its switch; active generations unchanged", kill+1)
	}
	if killed == 0 {
		t.Log("no kill landed inside a replay this time: the run proved less than usual")
	}
	p := startRankd(t, bin, env, replayArgs...)
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("replay not done after 3 minutes:\n%s", p.out.tail(40))
	}
	if p.err != nil {
		t.Fatalf("replay: %v\n%s", p.err, p.out.tail(40))
	}
	t.Logf("replay output:\n%s", p.out.tail(20))
	// A replay that found a killed one's lock says so while it waits, and
	// its summary's time leaves the wait out.
	if waitedLine, waitedSummary := strings.Contains(p.out.String(), "replay: another replay holds the lock; waiting for it until "),
		regexp.MustCompile(`replay: switched to generation \d+; \d+ keys of old generations deleted in \S+ \(after waiting \S+ for the lock\)\n`).MatchString(p.out.String()); waitedLine != waitedSummary {
		t.Errorf("waiting line %v, but summary with the wait %v:\n%s", waitedLine, waitedSummary, p.out.tail(20))
	}
	if err := <-bg; err != nil {
		t.Fatal(err)
	}
	drain(a, pa)
	want = expect(a.cfg, nil)
	if want.Messages != total {
		t.Fatalf("the log holds %d messages, want %d", want.Messages, total)
	}
	g := gens()
	active := g["a:anchor_total"]
	for _, bd := range a.cfg.Boards() {
		if g["a:"+bd.Name] != active || active == "" || active == "0" {
			t.Fatalf("active generations after the replay = %v, want every board in one new generation", g)
		}
	}
	compareStore(t, a.cfg, rdb, want.Oracle, nil, "(d) replayed while live")
	checkLateLetters(t, broker.Addrs(), a.dlq, lateSet(want.Rejected), "(a) after the live tail", want.Explain)
	// Only the active generation's board keys are left: the old one and
	// the partial ones of the killed replays are deleted.
	for _, k := range scanKeys(t, rdb, a.prefix+":*") {
		if strings.Contains(k, ":{") && !strings.HasPrefix(k, a.prefix+":g"+active+":") && !strings.HasPrefix(k, a.prefix+":wm:") {
			t.Errorf("key of a dropped generation left: %s", k)
			break
		}
		if strings.Contains(k, ":dims:") && !strings.HasPrefix(k, a.prefix+":g"+active+":") {
			t.Errorf("dims registry of a dropped generation left: %s", k)
			break
		}
	}
	// Finality is exported per board.
	pa.waitHTTP(20*time.Second, "http://"+a.listen+"/metrics", func(code int, body []byte) bool {
		return code == 200 && strings.Contains(string(body), `rankd_finality_oldest_open_period_start_timestamp_seconds{board="anchor_hot_30m"}`) &&
			strings.Contains(string(body), `rankd_finality_low_watermark_timestamp_seconds{board="anchor_7d"}`)
	})
	if pa.interrupt(15*time.Second) != 0 {
		t.Fatalf("rankd run exited non-zero:\n%s", pa.out.tail(40))
	}

	// --boards NEW after adding a board: it equals the oracle, every other
	// key is untouched.
	withNew := setup{path: writeReplayConfig(t, "a2", broker.Addrs()[0], rsrv.Addr(), a.listen, a.prefix, a.group, a.dlq, 1, 1000, newBoardYAML)}
	if withNew.cfg, err = config.Load(withNew.path); err != nil {
		t.Fatal(err)
	}
	dumpBefore := dumpKeys(t, rdb, a.prefix+":*")
	runReplay(t, bin, env, "--config", withNew.path, "--boards", "anchor_gifts_week", "--yes", "--progress", "none", "--drop-after", "100ms",
		"--lock-ttl", "2s", "--lock-wait", "20s")
	compareStore(t, withNew.cfg, rdb, expect(withNew.cfg, nil).Oracle, []string{"anchor_gifts_week"}, "--boards anchor_gifts_week")
	dumpAfter := dumpKeys(t, rdb, a.prefix+":*")
	changed := 0
	for k, v := range dumpBefore {
		if k == a.prefix+":gens" {
			continue
		}
		if dumpAfter[k] != v {
			changed++
			if changed < 4 {
				t.Errorf("key %s changed by a replay of another board", k)
			}
		}
	}
	if changed > 0 {
		t.Fatalf("%d keys changed", changed)
	}

	// --from: a fresh prefix gets exactly the messages from that time on,
	// judged with the stream times of the whole log.
	c := mk("c", 1, 1000, "")
	out = runReplay(t, bin, env, "--config", c.path, "--from", from.Format(time.RFC3339Nano), "--yes", "--progress", "none", "--drop-after", "100ms")
	wantFrom := expect(c.cfg, func(m oracle.LogMessage) bool { return !m.Time.Before(from) })
	applied := 0
	for _, m := range testenv.ReadLog(t, broker.Addrs(), topics...) {
		if !m.Time.Before(from) {
			applied++
		}
	}
	if !strings.Contains(out, fmt.Sprintf("messages %d (", applied)) {
		t.Fatalf("replay --from applied other than the %d messages from %s:\n%s", applied, from.Format(time.RFC3339Nano), out)
	}
	compareStore(t, c.cfg, rdb, wantFrom.Oracle, nil, "--from")
}

// newBoardYAML adds a board and its route to the example config.
const newBoardYAML = `
  - name: anchor_gifts_week
    title: Gift coins per anchor and week
    window: periodic
    every: 1w
    timezone: Asia/Shanghai
    retention: 1000h
`

var newRouteYAML = `
  - topic: gift
    boards: [anchor_gifts_week]
    member: anchor_id
    score: coins
`

// replayLogMessages returns n events of wl as messages, with disorder
// within a minute (30%), truly late events (3%: 40 minutes to 3 hours
// back) and duplicates (2%: the same message again a little later).
func replayLogMessages(wl *workload.Generator, rng *rand.Rand, n int) []kafka.Message {
	tsRe := regexp.MustCompile(`"ts":(\d+)`)
	var out []kafka.Message
	type pending struct {
		at int
		m  kafka.Message
	}
	var dups []pending
	for len(out) < n {
		for i := 0; i < len(dups); i++ {
			if dups[i].at <= len(out) && len(out) < n {
				out = append(out, dups[i].m)
				dups = slices.Delete(dups, i, i+1)
				i--
			}
		}
		if len(out) >= n {
			break
		}
		ev := wl.Next()
		shift := time.Duration(0)
		switch r := rng.Float64(); {
		case r < 0.30:
			shift = time.Duration(rng.IntN(60000)-30000) * time.Millisecond
		case r < 0.33:
			shift = -time.Duration(40*60+rng.IntN(140*60)) * time.Second
		}
		v := ev.Value
		if shift != 0 {
			v = tsRe.ReplaceAllFunc(v, func(b []byte) []byte {
				ms, _ := strconv.ParseInt(string(tsRe.FindSubmatch(b)[1]), 10, 64)
				return []byte(`"ts":` + strconv.FormatInt(ms+shift.Milliseconds(), 10))
			})
		}
		m := kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: v}
		out = append(out, m)
		if rng.Float64() < 0.02 {
			dups = append(dups, pending{at: len(out) + 1 + rng.IntN(300), m: m})
		}
	}
	return out
}

// writeReplayConfig writes the example config for one consumer of the test.
func writeReplayConfig(t *testing.T, name, broker, redisAddr, listen, prefix, group, dlq string, workers, batch int, extraBoards string) string {
	t.Helper()
	text := string(config.Example())
	reps := [][2]string{
		{"brokers: [localhost:9092]", "brokers: [" + broker + "]"},
		{"addr: localhost:6379", "addr: " + redisAddr},
		{`listen: ":8080"`, `listen: "` + listen + `"`},
		{"  prefix: rankd\n", "  prefix: " + prefix + "\n"},
		{"  group: rankd\n", "  group: " + group + "\n"},
		{"dead_letter_topic: rankd-dead-letter", "dead_letter_topic: " + dlq},
		{"  workers: 2\n", "  workers: " + strconv.Itoa(workers) + "\n"},
		{"    count: 1000 ", "    count: " + strconv.Itoa(batch) + " "},
		// periods of three days ago stay readable through the test
		{"x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n", "x-shanghai: &shanghai\n  timezone: Asia/Shanghai\n  retention: 240h\n"},
	}
	if extraBoards != "" {
		reps = append(reps, [2]string{"\nboards:\n", "\nboards:\n" + strings.TrimPrefix(extraBoards, "\n")},
			[2]string{"\nroutes:\n", "\nroutes:\n" + strings.TrimPrefix(newRouteYAML, "\n")})
	}
	for _, r := range reps {
		if strings.Count(text, r[0]) != 1 {
			t.Fatalf("config/example.yaml: %q is not there exactly once; update the replay test", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	path := filepath.Join(t.TempDir(), "rankd-"+name+".yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runReplay runs `rankd replay args...` to completion and returns its
// output; it fails the test on a non-zero exit.
func runReplay(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	p := startRankd(t, bin, env, append([]string{"replay"}, args...)...)
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("rankd replay %v not done after 3 minutes:\n%s", args, p.out.tail(40))
	}
	if p.err != nil {
		t.Fatalf("rankd replay %v: %v\n%s", args, p.err, p.out.tail(40))
	}
	return p.out.String()
}

var dryRunLine = regexp.MustCompile(`dead letters (\S+)\s+(\d+)`)

// dryRunCount returns the dead letters of reason in a replay's summary.
func dryRunCount(out, reason string) int {
	for _, m := range dryRunLine.FindAllStringSubmatch(out, -1) {
		if m[1] == reason {
			n, _ := strconv.Atoi(m[2])
			return n
		}
	}
	return 0
}

// lateSet returns the messages the oracle rejected as late.
func lateSet(rejected map[string]string) map[string]bool {
	out := map[string]bool{}
	for where, reason := range rejected {
		if reason == ingest.ReasonLate {
			out[where] = true
		}
	}
	return out
}

// checkLateLetters fails the test unless the late dead letters of topic
// (dead letters are at least once) are exactly the messages of want.
func checkLateLetters(t *testing.T, brokers []string, topic string, want map[string]bool, what string, explain func(string) string) {
	t.Helper()
	got := map[string]bool{}
	for _, m := range testenv.ReadLog(t, brokers, topic) {
		h := map[string]string{}
		for _, x := range m.Headers {
			if _, dup := h[x.Key]; !dup {
				h[x.Key] = string(x.Value)
			}
		}
		if h[consumer.HeaderReason] != ingest.ReasonLate {
			continue
		}
		if h[consumer.HeaderBoards] == "" {
			t.Errorf("%s: late dead letter without a boards header: %v", what, h)
		}
		where := h[consumer.HeaderTopic] + "/" + h[consumer.HeaderPartition] + "/" + h[consumer.HeaderOffset]
		got[where] = true
		if !want[where] {
			v := string(m.Value)
			if len(v) > 300 {
				v = v[:300] + "..."
			}
			t.Logf("%s: late dead letter the oracle does not expect: %s, headers %v, value %s", what, where, h, v)
			if explain != nil {
				t.Logf("%s: the oracle saw %s", what, explain(where))
			}
		}
	}
	var missing, extra []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Fatalf("%s: late dead letters differ from the oracle's %d: %d missing (%v), %d extra (%v)",
			what, len(want), len(missing), missing[:min(len(missing), 5)], len(extra), extra[:min(len(extra), 5)])
	}
	t.Logf("%s: %d late dead letters, as the oracle says", what, len(got))
}

// compareStore fails the test unless every board (only: these boards) of
// every stream and period equals the oracle's, read through a store on
// cfg's prefix (which follows the active generations).
func compareStore(t *testing.T, cfg *config.Config, rdb redis.UniversalClient, orc *oracle.Oracle, only []string, what string) {
	t.Helper()
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(cfg.Redis.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	boards, rows := 0, 0
	var diffs []string
	for _, s := range orc.Streams() {
		if only != nil && !slices.Contains(only, s.Board) {
			continue
		}
		for _, period := range orc.Periods(s.Board, s.Dims) {
			got, err := st.Entries(ctx, s.Board, s.Dims, period)
			if err != nil {
				t.Fatalf("%s: entries %s %q %s: %v", what, s.Board, s.Dims, period, err)
			}
			want := orc.Board(s.Board, s.Dims, period)
			boards++
			rows += len(want)
			if d := oracle.Diff(got, want); d != "" && len(diffs) < 5 {
				diffs = append(diffs, fmt.Sprintf("%s %q %s (%d rows, want %d):\n%s", s.Board, s.Dims, period, len(got), len(want), d))
			}
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: boards differ from the oracle:\n%s", what, strings.Join(diffs, "\n"))
	}
	if boards == 0 {
		t.Fatalf("%s: nothing compared", what)
	}
	t.Logf("%s: %d boards (stream x period), %d rows equal the oracle", what, boards, rows)
}

func scanKeys(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(t.Context(), 0, pattern, 1000).Iterator()
	for iter.Next(t.Context()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpKeys returns DUMP of every key matching pattern.
func dumpKeys(t *testing.T, rdb redis.UniversalClient, pattern string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range scanKeys(t, rdb, pattern) {
		v, err := rdb.Dump(t.Context(), k).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}
