package store_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// BenchmarkRollover rolls a rolling 7 x 1d board whose S(k-1) holds
// benchMembers members (1M by default) into S(k), and reports members/s and
// the longest single Redis command (from SLOWLOG, every command over 1 ms;
// wall time, so a loaded machine inflates it) and Redis CPU per member;
// RANKD_BENCH_CHUNK sets WithRolloverChunk. It runs for a board without a
// tiebreak (tie=none, the board of rankd bench's rollover) and one whose
// scores carry tie offsets (tie=first):
//
//	go test -run '^$' -bench BenchmarkRollover -benchtime 1x ./ranking/store/
func BenchmarkRollover(b *testing.B) {
	for _, tie := range []ranking.Tiebreak{ranking.TieNone, ranking.TieFirst} {
		b.Run("tie="+tie.String(), func(b *testing.B) { benchRollover(b, tie) })
	}
}

func benchRollover(b *testing.B, tie ranking.Tiebreak) {
	srv := testenv.NewRedis(b, testenv.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	unit, _ := ranking.ParseUnit("1d")
	board := &ranking.Board{Name: "r7", Window: ranking.WindowRolling, Every: unit, Periods: 7, Grace: 5 * time.Minute, Tiebreak: tie}
	cal := board.Calendar()
	codec, err := ranking.NewCodec(board)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rdb.FlushAll(ctx)
		opts := []store.Option{store.WithPrefix("roll")}
		if n, err := strconv.Atoi(os.Getenv("RANKD_BENCH_CHUNK")); err == nil && n > 0 {
			opts = append(opts, store.WithRolloverChunk(n))
		}
		st, err := store.New(rdb, []*ranking.Board{board}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		k := cal.At(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
		prev := cal.Prev(k)
		tag := store.Tag("r7", nil)
		old := k
		for range 7 {
			old = cal.Prev(old)
		}
		// S(k-1) and the day that leaves the window, P(k-7), hold every member.
		for _, key := range []string{store.Key("roll", tag, "r", prev.ID), store.Key("roll", tag, "p", old.ID)} {
			pipe := rdb.Pipeline()
			for lo := 0; lo < benchMembers; lo += 10000 {
				zs := make([]redis.Z, 0, 10000)
				for m := lo; m < min(lo+10000, benchMembers); m++ {
					value := int64(m%1000 + 2)
					if strings.HasSuffix(key, old.ID) && m%3 != 0 {
						value = 1 // members with m%3 == 0 had all their points in P(k-7): they drop out
					}
					score, err := codec.Encode(value, int64(m)%(codec.MaxTie()+1))
					if err != nil {
						b.Fatal(err)
					}
					zs = append(zs, redis.Z{Score: score, Member: member(m)})
				}
				pipe.ZAdd(ctx, key, zs...)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		rdb.HSet(ctx, store.Key("roll", tag, "meta", ""), "st", prev.Start.Add(23*time.Hour).UnixMilli(),
			"head", prev.Start.UnixMilli(), "rolled", prev.Start.UnixMilli())
		rdb.SAdd(ctx, "roll:dims:r7", tag)
		rdb.ConfigSet(ctx, "slowlog-log-slower-than", "1000") // every call over 1 ms
		rdb.ConfigSet(ctx, "slowlog-max-len", "100000")
		rdb.SlowLogReset(ctx)
		stats0 := commandStats(b, rdb)
		cpu0 := must(srv.UsedCPU(ctx))
		b.StartTimer()
		start := time.Now()
		if err := st.Rollover(ctx, "r7", k.Start.Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		b.StopTimer()
		cpu := must(srv.UsedCPU(ctx)) - cpu0
		logs, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		var worst time.Duration
		var worstCmd string
		for _, l := range logs {
			if l.Duration > worst {
				worst, worstCmd = l.Duration, l.Args[0]
			}
		}
		n, _ := rdb.ZCard(ctx, store.Key("roll", tag, "r", k.ID)).Result()
		if want := int64(benchMembers - (benchMembers+2)/3); n != want {
			b.Fatalf("S(k) has %d members, want %d", n, want)
		}
		rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000")
		b.ReportMetric(float64(benchMembers)/el.Seconds(), "members/s")
		b.ReportMetric(float64(worst.Microseconds()), "max-call-µs")
		b.ReportMetric(el.Seconds(), "s/rollover")
		b.ReportMetric(cpu*1e6/float64(benchMembers), "redis-µs/member")
		printStats(b, stats0, commandStats(b, rdb), 1)
		b.ReportMetric(0, "ns/op")
		b.Logf("longest command: %s %v over %d logged commands", worstCmd, worst, len(logs))
	}
}
