package store_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// The apply benchmark of issue 2: a rolling 7 x 1d board prefilled with
// benchMembers members (1M by default; RANKD_BENCH_MEMBERS overrides),
// updates drawn zipf(1.1) over them, batches of 2,000. Sub-benchmarks: rankd
// during the day (head = today: P(c), S(c)), rankd after the prefill of
// tomorrow started (head = tomorrow: P(c), S(c), S(c+1)), the seed 000 script
// pipelined per event, and the seed script one round trip per event. Each
// reports updates/s and Redis server CPU per update (INFO cpu deltas):
//
//	go test -run '^$' -bench BenchmarkApply -benchtime 20x ./ranking/
const benchBatch = 2000

var benchMembers = func() int {
	if n, err := strconv.Atoi(os.Getenv("RANKD_BENCH_MEMBERS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}()

type benchEnv struct {
	srv   *testenv.RedisServer
	rdb   *redis.Client
	store *store.Store
	board *ranking.Board
	day   ranking.Period
	zipf  *rand.Zipf
	seq   int
}

var (
	benchOnce sync.Once
	bench     *benchEnv
)

func benchSetup(b *testing.B) *benchEnv {
	benchOnce.Do(func() {
		srv := testenv.NewRedis(b, testenv.RedisOptions{})
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 4})
		unit, _ := ranking.ParseUnit("1d")
		board := &ranking.Board{Name: "anchor_7d", Window: ranking.WindowRolling, Every: unit, Periods: 7, Grace: 5 * time.Minute}
		st, err := store.New(rdb, []*ranking.Board{board}, store.WithPrefix("bench"))
		if err != nil {
			b.Fatal(err)
		}
		cal := board.Calendar()
		today := cal.At(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		e := &benchEnv{srv: srv, rdb: rdb, store: st, board: board, day: today,
			zipf: rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, uint64(benchMembers-1))}
		e.prefill(b)
		bench = e
	})
	return bench
}

// prefill writes benchMembers members into every sorted set either apply
// touches: rankd's P(c), P(c-7), S(c), S(c+1) and the seed's four boards.
func (e *benchEnv) prefill(b *testing.B) {
	ctx := context.Background()
	cal := e.board.Calendar()
	tag := store.Tag("anchor_7d", nil)
	old := e.day
	for range 7 {
		old = cal.Prev(old)
	}
	keys := []string{
		store.Key("bench", tag, "p", e.day.ID), store.Key("bench", tag, "p", old.ID),
		store.Key("bench", tag, "r", e.day.ID), store.Key("bench", tag, "r", cal.Next(e.day).ID),
		"seed:day:" + e.day.ID, "seed:roll:" + e.day.ID, "seed:day:" + old.ID, "seed:roll:" + cal.Next(e.day).ID,
	}
	const chunk = 10000
	for _, k := range keys {
		pipe := e.rdb.Pipeline()
		for lo := 0; lo < benchMembers; lo += chunk {
			zs := make([]redis.Z, 0, chunk)
			for i := lo; i < min(lo+chunk, benchMembers); i++ {
				zs = append(zs, redis.Z{Score: float64(benchMembers - i), Member: member(i)}) // distinct scores, popular members first
			}
			pipe.ZAdd(ctx, k, zs...)
			if pipe.Len() >= 20 {
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	e.setHead(b, false)
	if err := e.rdb.SAdd(ctx, "bench:dims:anchor_7d", tag).Err(); err != nil {
		b.Fatal(err)
	}
}

// setHead sets the stream state: during the day head is today (events write
// P(c) and S(c)); once the rollover to tomorrow has started (the last
// rollover.lead minutes of the day) head is tomorrow and events also write
// S(c+1).
func (e *benchEnv) setHead(b *testing.B, tomorrow bool) {
	cal := e.board.Calendar()
	head := e.day
	if tomorrow {
		head = cal.Next(e.day)
	}
	if err := e.rdb.HSet(context.Background(), store.Key("bench", store.Tag("anchor_7d", nil), "meta", ""),
		"st", e.day.Start.Add(time.Hour).UnixMilli(), "head", head.Start.UnixMilli(), "rolled", head.Start.UnixMilli()).Err(); err != nil {
		b.Fatal(err)
	}
}

func member(i int) string { return "a" + strconv.Itoa(i) }

func (e *benchEnv) batch() []ranking.Update {
	ups := make([]ranking.Update, benchBatch)
	t := e.day.Start.Add(2 * time.Hour)
	for i := range ups {
		e.seq++
		ups[i] = ranking.Update{Board: "anchor_7d", Member: member(int(e.zipf.Uint64())), Value: 1 + int64(e.seq%50),
			Time: t.Add(time.Duration(e.seq) * time.Millisecond), MsgID: "m" + strconv.Itoa(e.seq)}
	}
	return ups
}

func (e *benchEnv) cpu(b *testing.B) float64 {
	v, err := e.srv.UsedCPU(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func BenchmarkApply(b *testing.B) {
	e := benchSetup(b)
	ctx := context.Background()
	// the seed 000 script: its one copy is the one rankd bench embeds
	seed := redis.NewScript(string(must(os.ReadFile("../../cmd/rankd/internal/bench/seed000.lua"))))
	old := e.day
	for range 7 {
		old = e.board.Calendar().Prev(old)
	}
	seedKeys := []string{"seed:day:" + e.day.ID, "seed:roll:" + e.day.ID, "seed:day:" + old.ID,
		"seed:roll:" + e.board.Calendar().Next(e.day).ID}
	if err := seed.Load(ctx, e.rdb).Err(); err != nil {
		b.Fatal(err)
	}
	run := func(name string, apply func(ups []ranking.Update)) {
		b.Run(name, func(b *testing.B) {
			batches := make([][]ranking.Update, b.N)
			for i := range batches {
				batches[i] = e.batch()
			}
			stats0 := commandStats(b, e.rdb)
			cpu0 := e.cpu(b)
			b.ResetTimer()
			start := time.Now()
			for _, ups := range batches {
				apply(ups)
			}
			el := time.Since(start)
			b.StopTimer()
			n := float64(b.N * benchBatch)
			b.ReportMetric(n/el.Seconds(), "updates/s")
			b.ReportMetric((e.cpu(b)-cpu0)*1e6/n, "redis-µs/update")
			b.ReportMetric(0, "ns/op")
			printStats(b, stats0, commandStats(b, e.rdb), int(n))
		})
	}
	apply := func(ups []ranking.Update) {
		res, err := e.store.Apply(ctx, store.Group(ups))
		if err != nil {
			b.Fatal(err)
		}
		if n := res.Count(ranking.StatusApplied); n != len(ups) {
			b.Fatalf("applied %d of %d", n, len(ups))
		}
	}
	e.setHead(b, false)
	run("rankd", apply)
	e.setHead(b, true)
	run("rankd-after-prefill", apply)
	e.setHead(b, false)
	run("seed-pipelined", func(ups []ranking.Update) {
		pipe := e.rdb.Pipeline()
		for _, u := range ups {
			seed.EvalSha(ctx, pipe, seedKeys, u.Member, u.Value)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cmds {
			if c.Err() != nil {
				b.Fatal(c.Err())
			}
		}
	})
	run("seed-naive", func(ups []ranking.Update) {
		for _, u := range ups {
			if err := seed.EvalSha(ctx, e.rdb, seedKeys, u.Member, u.Value).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}
