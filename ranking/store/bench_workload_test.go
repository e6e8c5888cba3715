package store_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/workload"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

// BenchmarkApplyWorkload applies the standard workload (70% like, 20%
// comment, 10% gift; anchors zipf(1.1) over 100k, users zipf(1.05) over 1M,
// as `rankd produce` generates it) routed by the example config into its 9
// boards, in batches of 2,000 events applied as live consumption applies
// them (ApplyFrom, one partition), once per update and once packed
// (WithPacking), and reports Redis server CPU per event and per update
// (INFO cpu) and events/s (RANKD_BENCH_BATCH sets the batch size;
// RANKD_BENCH_ARGS=plain sends the arguments as ARGV strings). With
// RANKD_BENCH_STATS=1 it also
// prints INFO commandstats per event (where the Redis time goes):
//
//	go test -run '^$' -bench BenchmarkApplyWorkload -benchtime 20x ./ranking/store/
//
// The first batches warm the boards up (empty at the start); -benchtime
// 20x and more gives stable figures.
//
// With REDIS_ADDR set it runs against that server (an empty one) instead
// of one of its own: a redis-server under `valgrind --tool=callgrind`
// counts the instructions Redis spends per event, a figure that does not
// move with the machine's load (docs/benchmarks.md, "Where Redis'
// instructions go").
func BenchmarkApplyWorkload(b *testing.B) {
	var srv *testenv.RedisServer
	if os.Getenv("REDIS_ADDR") != "" {
		srv = testenv.Redis(b)
	} else {
		srv = testenv.NewRedis(b, testenv.RedisOptions{})
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 4})
	defer rdb.Close()
	ctx := context.Background()
	cfg, router := store.LoadExample(b)
	runs := 0
	for _, size := range benchCallSizes() {
		for _, packed := range []bool{false, true} {
			name := "events"
			opts := []store.Option{store.WithPrefix(fmt.Sprintf("wl%d%v", size, packed)), store.WithPacking(packed)}
			if os.Getenv("RANKD_BENCH_ARGS") == "plain" {
				opts = append(opts, store.WithPlainArgs())
			}
			if size > 0 {
				name = fmt.Sprintf("call=%d", size)
				opts = append(opts, store.WithCallSize(size))
			}
			name += fmt.Sprintf(",packed=%v", packed)
			st, err := store.New(rdb, cfg.Boards(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			var off int64 // the store's partition position, across runs
			left := ""
			b.Run(name, func(b *testing.B) {
				runs++ // fresh event IDs for each run (b.N grows run by run)
				w := newBenchWorkload(uint64(runs), time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC))
				batches := make([][]ranking.Update, b.N)
				events := 0
				for i := range batches {
					for range workloadBatch() {
						batches[i] = w.route(b, cfg, router, batches[i])
						events++
					}
				}
				ups := 0
				for _, bt := range batches {
					ups += len(bt)
				}
				stats0 := commandStats(b, rdb)
				cpu0 := must(srv.UsedCPU(ctx))
				b.ResetTimer()
				start := time.Now()
				for _, bt := range batches {
					// as live consumption applies: ApplyFrom, one partition's span
					evs := store.Group(bt)
					sp := []store.Span{{Topic: "t", Partition: 0, From: off, To: off + int64(len(evs)), Expect: left}}
					off += int64(len(evs))
					res, err := st.ApplyFrom(ctx, evs, sp)
					left = sp[0].Left
					if err != nil {
						b.Fatal(err)
					}
					if n := res.Count(ranking.StatusApplied); n != len(bt) {
						b.Fatalf("applied %d of %d", n, len(bt))
					}
				}
				el := time.Since(start)
				b.StopTimer()
				cpu := must(srv.UsedCPU(ctx)) - cpu0
				b.ReportMetric(float64(events)/el.Seconds(), "events/s")
				b.ReportMetric(cpu*1e6/float64(events), "redis-µs/event")
				b.ReportMetric(cpu*1e6/float64(ups), "redis-µs/update")
				b.ReportMetric(float64(ups)/float64(events), "updates/event")
				b.ReportMetric(0, "ns/op")
				printStats(b, stats0, commandStats(b, rdb), events)
			})
		}
	}
}

// workloadBatch is the events per batch: benchBatch, or RANKD_BENCH_BATCH
// (live consumption at 20,000 events/s applies batches of about 130: 20 ms
// of linger over 3 workers).
func workloadBatch() int {
	if env := os.Getenv("RANKD_BENCH_BATCH"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil || n < 1 {
			panic(fmt.Sprintf("RANKD_BENCH_BATCH=%q: want a positive number", env))
		}
		return n
	}
	return benchBatch
}

// benchCallSizes are the call sizes to compare (RANKD_BENCH_CALL=500,1000);
// 0 is the store's default.
func benchCallSizes() []int {
	sizes := []int{0}
	if env := os.Getenv("RANKD_BENCH_CALL"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				panic(fmt.Sprintf("RANKD_BENCH_CALL=%q: %v", env, err))
			}
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// benchWorkload is the standard workload (internal/workload, as `rankd
// produce` and `rankd bench` send it) decoded and routed by the config.
type benchWorkload struct {
	g *workload.Generator
	n int64
}

// newBenchWorkload starts the workload of seed at start, 1 ms per event.
func newBenchWorkload(seed uint64, start time.Time) *benchWorkload {
	g, err := workload.New(workload.Config{Seed: int64(seed), Start: start, Step: time.Millisecond})
	if err != nil {
		panic(err) // all topics, a fixed config: cannot fail
	}
	return &benchWorkload{g: g}
}

// route generates the next event and appends its updates.
func (w *benchWorkload) route(b *testing.B, cfg *config.Config, r *ingest.Router, dst []ranking.Update) []ranking.Update {
	ev := w.g.Next()
	w.n++
	e, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, w.n, ev.Value, nil, ev.Time)
	if err != nil {
		b.Fatal(err)
	}
	out, err := r.AppendRoute(dst, e)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// commandStats returns INFO commandstats: calls and µs per command.
func commandStats(b *testing.B, rdb *redis.Client) map[string][2]float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string][2]float64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = [2]float64{calls, usec}
	}
	return out
}

// printStats prints, with RANKD_BENCH_STATS=1, the commands run between two
// commandStats per unit: calls and µs (EVALSHA's µs include the commands
// its script runs).
func printStats(b *testing.B, before, after map[string][2]float64, units int) {
	if ok, _ := strconv.ParseBool(os.Getenv("RANKD_BENCH_STATS")); !ok {
		return
	}
	type row struct {
		name        string
		calls, usec float64
	}
	var rows []row
	for name, a := range after {
		c, u := a[0]-before[name][0], a[1]-before[name][1]
		if c > 0 {
			rows = append(rows, row{name, c / float64(units), u / float64(units)})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].usec > rows[j].usec })
	var sb strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&sb, "\n  %-16s %8.3f calls %8.3f µs", r.name, r.calls, r.usec)
	}
	fmt.Printf("%s: Redis commands per unit (%d units):%s\n", b.Name(), units, sb.String())
}
