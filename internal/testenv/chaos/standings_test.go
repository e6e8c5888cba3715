package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking/store"
)

var standingsLong = flag.Bool("standings-long", false, "TestStandings: more periods, zones and kills")

const standingsConfig = `
kafka:
  brokers: [%s]
  topics: [gift]
  batch: {linger: 5ms}
redis:
  addr: %s
  prefix: stdt
http:
  listen: "%s"
standings:
  interval: 200ms
  lock_ttl: 2s
boards:
  - name: hot_30m
    every: 30m
    timezone: Asia/Shanghai
    dims: [zone]
    tiebreak: first
    grace: 10m
    retention: 48h
    publish: {top: 5}
  - name: hot_1h
    every: 1h
    timezone: Asia/Shanghai
    aggregate: max
    sort: [{field: coins, bits: 24}, {field: count, bits: 12}]
    grace: 10m
    retention: 48h
    publish: {top: 3}
  - name: hot_roll
    window: rolling
    every: 30m
    periods: 3
    grace: 10m
    retention: 48h
    publish: {top: 4}
routes:
  - topic: gift
    member: anchor_id
    score: coins
    boards: [hot_30m, hot_roll]
  - topic: gift
    member: anchor_id
    sort: {coins: coins, count: count}
    boards: [hot_1h]
`

const standingsTopic = "rankd-standings"

// TestStandings runs two `rankd run` processes publishing the sealed
// standings of a 30-minute board with dims, an hourly multi-factor board
// and a rolling board, while the test produces events over several
// periods (disorder and late events inside the grace, a few beyond it) in
// steps. After each step it waits until everything is applied and checks
// that no published period is before its grace ended (every partition's
// stream time, known to the test, is past its end plus grace). It kills
// the lock holder with SIGKILL as soon as a step's publication starts.
// At the end the standings topic must equal the oracle's top N for every
// final period, with each content under one ID; then a period sealed from
// a wrong value (the test corrupts it in Redis before it is final) is
// rebuilt by `rankd replay`, which must publish revision 1, equal to the
// oracle, counted in rankd_standings_revisions_total.
func TestStandings(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	bin := testenv.BuildRankd(t)
	const partitions = 3
	broker := testenv.StartBrokerProcess(t, testenv.BrokerProcessOptions{
		Topics: []string{"gift", "rankd-dead-letter", standingsTopic}, Partitions: partitions})
	brokers := broker.Addrs()
	rs := testenv.NewRedis(t, testenv.RedisOptions{})
	rdb := rs.Client(t)

	var ins []*instance
	var paths []string
	for i := range 2 {
		listen := freeAddr(t)
		path := filepath.Join(t.TempDir(), fmt.Sprintf("std%d.yaml", i))
		if err := os.WriteFile(path, fmt.Appendf(nil, standingsConfig, brokers[0], rs.Addr(), listen), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
		ins = append(ins, newInstance(t, fmt.Sprintf("rankd%d", i+1), bin, path, listen,
			"--session-timeout", "1s", "--heartbeat-interval", "100ms", "--rebalance-timeout", "1s"))
	}
	cfg, err := config.Load(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if err := in.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range ins {
		if err := in.waitHealthy(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.New(rdb, cfg.Boards(), store.WithPrefix(cfg.Redis.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	off := newOffsetReader(t, brokers, cfg.Kafka.Group, []string{"gift"})
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "gift", RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, Balancer: kafka.BalancerFunc(func(m kafka.Message, ps ...int) int {
			p, _ := strconv.Atoi(string(m.Key[:1]))
			return ps[p%len(ps)]
		})}
	t.Cleanup(func() { _ = w.Close() })

	steps, zones := 7, 6
	if *standingsLong {
		steps, zones = 16, 20
	}
	rng := rand.New(rand.NewPCG(7, 23))
	grace := 10 * time.Minute
	t0 := time.Now().Add(-10 * time.Hour).Truncate(time.Hour)
	stream := make([]time.Time, partitions) // per partition: the greatest event time sent
	n := 0
	gift := func(p int, ts time.Time, anchor, zone string, coins, count int) kafka.Message {
		n++
		if ts.After(stream[p]) {
			stream[p] = ts
		}
		v := fmt.Sprintf(`{"id":"s-%d","ts":%d,"user_id":"u%d","anchor_id":%q,"room_id":"r1","zone":%q,"gift_id":"rose","count":%d,"coins":%d}`,
			n, ts.UnixMilli(), n%17, anchor, zone, count, coins)
		return kafka.Message{Key: []byte(strconv.Itoa(p) + anchor), Value: []byte(v)}
	}
	send := func(msgs []kafka.Message) {
		t.Helper()
		if err := w.WriteMessages(t.Context(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	// drained waits until rankd applied everything sent, then a few seal
	// intervals more.
	drained := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			s, err := off.read(t.Context())
			if err == nil && s.drained() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rankd did not apply the events within 60s (%v)\n%s\n%s", err, ins[0].tail(20), ins[1].tail(20))
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	// low is the least stream time of the partitions: what finality sees.
	low := func() time.Time { return slices.MinFunc(stream, func(a, b time.Time) int { return a.Compare(b) }) }
	checkNotEarly := func(step int) []published {
		t.Helper()
		pubs := readStandings(t, brokers)
		lw := low()
		for _, p := range pubs {
			b := cfg.Board(p.board)
			per, err := b.Calendar().Parse(p.doc.Period.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !b.Late(per, lw) {
				t.Errorf("step %d: %s %s published before its grace ended: partitions' least stream time %v < end %v + grace",
					step, p.id, p.doc.Period.ID, lw.UTC(), per.End.UTC())
			}
		}
		return pubs
	}

	// The steps: each covers 40 minutes of event time on every partition,
	// in disorder within 8 minutes (inside the grace), with a late event
	// inside the grace for the period that just ended (a new anchor that
	// tops it) and, once in a while, one beyond the grace (dead-lettered).
	// Every partition writes a mark first: finality counts only the
	// partitions that wrote one.
	var warm []kafka.Message
	for p := range partitions {
		warm = append(warm, gift(p, t0.Add(-3*time.Hour), "a0", "z0", 1, 1))
	}
	send(warm)
	drained()
	clock := t0
	var corrupt struct {
		key, member string
		snap        string
		period      string
	}
	kills := 0
	for step := range steps {
		var msgs []kafka.Message
		end := clock.Add(40 * time.Minute)
		for ; clock.Before(end); clock = clock.Add(20 * time.Second) {
			for p := range partitions {
				ts := clock.Add(-time.Duration(rng.IntN(8*60)) * time.Second)
				anchor := fmt.Sprintf("a%d", rng.IntN(12))
				msgs = append(msgs, gift(p, ts, anchor, fmt.Sprintf("z%d", rng.IntN(zones)), 1+rng.IntN(50), 1+rng.IntN(9)))
			}
		}
		// Late inside the grace: the period that ended before clock.
		ended := clock.Truncate(30 * time.Minute)
		if clock.Sub(ended) < grace-time.Minute {
			msgs = append(msgs, gift(step%partitions, ended.Add(-time.Minute), fmt.Sprintf("late%d", step), "z0", 5000, 1))
		}
		if step%3 == 2 { // beyond the grace: dead-lettered, changes nothing
			msgs = append(msgs, gift(step%partitions, clock.Add(-grace-time.Hour), "toolate", "z0", 9000, 1))
		}
		before := len(readStandings(t, brokers))
		send(msgs)
		if step == 2 {
			// Corrupt a period that is over but not final yet: the
			// snapshot will be sealed from the wrong value; the replay
			// later must publish revision 1.
			drained()
			p := cfg.Board("hot_30m").Calendar().At(ended.Add(-time.Minute))
			corrupt.key = fmt.Sprintf("stdt:{hot_30m|z1}:p:%s", p.ID)
			corrupt.snap = "hot_30m|z1/" + p.ID
			corrupt.member, corrupt.period = "a1", p.ID
			if err := rdb.ZIncrBy(t.Context(), corrupt.key, 1<<20, corrupt.member).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// Close the step: every partition moves on by one more event.
		var closing []kafka.Message
		for p := range partitions {
			closing = append(closing, gift(p, clock, "a0", "z0", 1, 1))
		}
		send(closing)
		if step%2 == 1 && kills < 3 { // kill the publisher as its publication starts
			if pid := killHolder(t, st, ins, brokers, before); pid > 0 {
				kills++
			}
		}
		drained()
		for _, in := range ins {
			if !in.running() {
				if err := in.start(); err != nil {
					t.Fatal(err)
				}
				if err := in.waitHealthy(60 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkNotEarly(step)
	}
	drained()
	pubs := checkNotEarly(steps)
	t.Logf("%d events, %d instances killed while publishing, %d standings messages", n, kills, len(pubs))

	// The oracle.
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	log := testenv.ReadLog(t, brokers, "gift")
	orc := oracle.Log{Schemas: cfg.Schemas(), Router: router}.FromLog(cfg.Boards(), log).Oracle
	want := expectedStandings(t, cfg, orc, low(), t0, zones)
	checkStandings(t, pubs, want, corrupt.snap, false)
	// The corrupted snapshot: revision 0 holds the wrong value.
	wrongID := "hot_30m|z1/" + corrupt.period + "/0"
	if p := findID(pubs, wrongID); p == nil || len(p.doc.Entries) == 0 || p.doc.Entries[0].Member != corrupt.member {
		t.Fatalf("the snapshot sealed from the corrupted value is not as expected: %+v", p)
	}

	// The HTTP API serves the snapshot as published, byte for byte.
	last := pubs[len(pubs)-1]
	body := httpGet(t, ins[0].base+"/v1/boards/"+last.board+"/standings?period="+last.doc.Period.ID+dimsParam(last.doc.Dims))
	if strings.TrimSpace(body) != string(last.value) {
		t.Errorf("the API's snapshot differs from the published one:\n api %s\npub %s", body, last.value)
	}

	// A replay rebuilds hot_30m from the log: the corrupted period's
	// standings differ from what was published, so revision 1 follows.
	out, err := exec.Command(bin, "replay", "--config", paths[0], "--boards", "hot_30m", "--yes", "--drop-after", "200ms").CombinedOutput()
	if err != nil {
		t.Fatalf("rankd replay: %v\n%s", err, out)
	}
	var rev1 *published
	for deadline := time.Now().Add(30 * time.Second); rev1 == nil; time.Sleep(200 * time.Millisecond) {
		pubs = readStandings(t, brokers)
		rev1 = findID(pubs, "hot_30m|z1/"+corrupt.period+"/1")
		if rev1 == nil && time.Now().After(deadline) {
			t.Fatalf("no revision 1 of %s within 30s of the replay\n%s\n%s", corrupt.period, ins[0].tail(20), ins[1].tail(20))
		}
	}
	time.Sleep(time.Second)
	pubs = readStandings(t, brokers)
	checkStandings(t, pubs, want, corrupt.snap, true)
	revisions := 0.0
	for _, in := range ins {
		m, err := in.metrics()
		if err != nil {
			t.Fatal(err)
		}
		revisions += sumMetric(m, "rankd_standings_revisions_total")
	}
	if revisions != 1 {
		t.Errorf("rankd_standings_revisions_total: got %v, want 1 (only the corrupted period changed)", revisions)
	}
	body = httpGet(t, ins[1].base+"/v1/boards/hot_30m/standings?period="+corrupt.period+"&dims=zone:z1")
	if strings.TrimSpace(body) != string(rev1.value) {
		t.Errorf("the API does not serve revision 1:\n%s", body)
	}
}

// published is one message of the standings topic.
type published struct {
	board, id, key string
	rev            int
	value          []byte
	doc            standingsDoc
}

type standingsDoc struct {
	Board   string                          `json:"board"`
	Counts  struct{ Members, Events int64 } `json:"counts"`
	Dims    map[string]string               `json:"dims"`
	Entries []struct {
		Member  string           `json:"member"`
		Rank    int64            `json:"rank"`
		Raw     int64            `json:"raw"`
		TieTime string           `json:"tie_time"`
		Factors map[string]int64 `json:"factors"`
	} `json:"entries"`
	ID     string `json:"id"`
	Period struct {
		ID, Start, End string
	} `json:"period"`
	Revision int `json:"revision"`
}

func readStandings(t *testing.T, brokers []string) []published {
	t.Helper()
	var out []published
	for _, m := range testenv.ReadLog(t, brokers, standingsTopic) {
		p := published{value: m.Value}
		for _, h := range m.Headers {
			switch h.Key {
			case "id":
				p.id = string(h.Value)
			case "board":
				p.board = string(h.Value)
			case "revision":
				p.rev, _ = strconv.Atoi(string(h.Value))
			}
		}
		if err := json.Unmarshal(m.Value, &p.doc); err != nil {
			t.Fatalf("%s: %v: %s", m.Where(), err, m.Value)
		}
		if p.doc.ID != p.id || p.doc.Board != p.board || p.doc.Revision != p.rev {
			t.Fatalf("%s: headers (id %s, board %s, revision %d) disagree with the payload %s", m.Where(), p.id, p.board, p.rev, m.Value)
		}
		out = append(out, p)
	}
	return out
}

func findID(pubs []published, id string) *published {
	for i := range pubs {
		if pubs[i].id == id {
			return &pubs[i]
		}
	}
	return nil
}

// killHolder waits for a standings message beyond the first before, then
// kills the process holding the publisher lock at once (SIGKILL). It
// returns the pid killed (0: none).
func killHolder(t *testing.T, st *store.Store, ins []*instance, brokers []string, before int) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(readStandings(t, brokers)) <= before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 0
		}
	}
	holder, err := st.StandingsLockHolder(t.Context())
	if err != nil || holder == "" {
		return 0
	}
	parts := strings.Split(holder, "/")
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	for _, in := range ins {
		if in.pid() == pid {
			in.kill()
			t.Logf("killed %s (pid %d), the standings publisher", in.name, pid)
			return pid
		}
	}
	return 0
}

// wanted is an expected snapshot: the oracle's top N and member count.
type wanted struct {
	board, tag, period string
	top                []oracle.Entry
	members            int
	events             int64
}

// expectedStandings returns every snapshot that must be published: each
// board, dims and period with members that is final at stream time low.
func expectedStandings(t *testing.T, cfg *config.Config, orc *oracle.Oracle, low, t0 time.Time, zones int) map[string]wanted {
	out := map[string]wanted{}
	for name, pub := range cfg.Standings.Boards {
		b := cfg.Board(name)
		cal := b.Calendar()
		var dimsList [][]string
		if len(b.Dims) == 0 {
			dimsList = [][]string{nil}
		} else {
			for z := range zones {
				dimsList = append(dimsList, []string{fmt.Sprintf("z%d", z)})
			}
		}
		for p := cal.At(t0.Add(-4 * time.Hour)); b.Late(p, low); p = cal.Next(p) {
			for _, dims := range dimsList {
				es := orc.Board(name, dims, p.ID)
				if len(es) == 0 {
					continue
				}
				tag := store.Tag(name, dims)
				out[tag+"/"+p.ID] = wanted{board: name, tag: tag, period: p.ID, top: es[:min(len(es), pub.Top)], members: len(es),
					events: orc.Events(name, dims, p.ID)}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no period is final: the test sent too little")
	}
	return out
}

// checkStandings compares the topic with the expected snapshots: each
// content under one ID, the latest revision of every expected snapshot
// equal to the oracle (except wrong's before the replay: sealed from a
// corrupted value), nothing published that is not expected, and revisions
// above 0 only for wrong after the replay.
func checkStandings(t *testing.T, pubs []published, want map[string]wanted, wrong string, replayed bool) {
	t.Helper()
	byID := map[string][]byte{}
	latest := map[string]published{}
	repeats := 0
	for _, p := range pubs {
		if prev, ok := byID[p.id]; ok {
			if string(prev) != string(p.value) {
				t.Errorf("ID %s was published with two contents:\n%s\n%s", p.id, prev, p.value)
			}
			repeats++
			continue
		}
		byID[p.id] = p.value
		key := p.id[:strings.LastIndexByte(p.id, '/')]
		if l, ok := latest[key]; !ok || p.rev > l.rev {
			latest[key] = p
		}
	}
	t.Logf("%d distinct standings revisions, %d repeated publications (byte-identical)", len(byID), repeats)
	for key, p := range latest {
		w, ok := want[key]
		if !ok {
			t.Errorf("%s published, but the period is not final or has no members per the oracle", p.id)
			continue
		}
		if p.rev > 0 && (!replayed || key != wrong) {
			t.Errorf("%s: a revision of a period whose standings did not change", p.id)
		}
		if key == wrong && !replayed {
			continue
		}
		if diff := docDiff(p.doc, w); diff != "" {
			t.Errorf("%s differs from the oracle: %s\n%s", p.id, diff, p.value)
		}
	}
	for key := range want {
		if _, ok := latest[key]; !ok {
			t.Errorf("%s is final with members but was never published", key)
		}
	}
}

func docDiff(d standingsDoc, w wanted) string {
	if d.Counts.Members != int64(w.members) {
		return fmt.Sprintf("members %d, want %d", d.Counts.Members, w.members)
	}
	if d.Counts.Events != w.events {
		return fmt.Sprintf("events %d, want %d", d.Counts.Events, w.events)
	}
	if len(d.Entries) != len(w.top) {
		return fmt.Sprintf("%d entries, want %d", len(d.Entries), len(w.top))
	}
	for i, e := range d.Entries {
		if e.Member != w.top[i].Member || e.Raw != w.top[i].Value || e.Rank != int64(i+1) {
			return fmt.Sprintf("row %d: %s=%d (rank %d), want %s=%d", i+1, e.Member, e.Raw, e.Rank, w.top[i].Member, w.top[i].Value)
		}
	}
	return ""
}

func dimsParam(d map[string]string) string {
	var parts []string
	for k, v := range d {
		parts = append(parts, k+":"+v)
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return "&dims=" + strings.Join(parts, ",")
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}
