package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

const (
	rolloverPrefix = "roll"
	rolloverBoard  = "r7"
	// readerPause is the reader's pause between two calls.
	readerPause = time.Millisecond
)

// rollover measures the prefill of a rolling 7 x 1d board whose S(k-1)
// holds RolloverMembers members into S(k) (Store.Rollover, as the
// rollover timer runs it): S(k-1) and the day leaving the window, P(k-7),
// hold every member, and the members with all their points in P(k-7) (one
// in three) drop out. Meanwhile a reader on its own connection runs
// ZREVRANGE S(k-1) 0 9 WITHSCORES in a loop (1 ms apart) and records each
// call's round trip: the worst is the longest a reader waits behind the
// rollover's script calls. SLOWLOG gives the longest call Redis ran.
func (e *env) rollover(ctx context.Context) (*Rollover, error) {
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	n := e.o.RolloverMembers
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr})
	defer rdb.Close()
	unit, err := ranking.ParseUnit("1d")
	if err != nil {
		return nil, err
	}
	board := &ranking.Board{Name: rolloverBoard, Window: ranking.WindowRolling, Every: unit, Periods: 7, Grace: 5 * time.Minute}
	st, err := store.New(rdb, []*ranking.Board{board}, store.WithPrefix(rolloverPrefix), store.WithLogger(e.o.Log))
	if err != nil {
		return nil, err
	}
	cal := board.Calendar()
	k := cal.At(time.Now().UTC())
	prev := cal.Prev(k)
	old := k
	for range 7 {
		old = cal.Prev(old)
	}
	tag := store.Tag(rolloverBoard, nil)
	prevKey := store.Key(rolloverPrefix, tag, store.KindRolling, prev.ID)
	var filled atomic.Int64
	e.prog.set("rollover: prefill", func() (int64, int64) { return filled.Load(), 2 * int64(n) })
	for _, key := range []string{prevKey, store.Key(rolloverPrefix, tag, store.KindPeriod, old.ID)} {
		pipe := rdb.Pipeline()
		for lo := 0; lo < n; lo += 10000 {
			zs := make([]redis.Z, 0, 10000)
			for m := lo; m < min(lo+10000, n); m++ {
				score := float64(m%1000 + 2)
				if key != prevKey && m%3 != 0 {
					score = 1 // members with m%3 == 0 had all their points in P(k-7): they drop out
				}
				zs = append(zs, redis.Z{Score: score, Member: "a" + strconv.Itoa(m)})
			}
			pipe.ZAdd(ctx, key, zs...)
			if pipe.Len() >= 10 {
				if _, err := pipe.Exec(ctx); err != nil {
					return nil, err
				}
			}
			filled.Add(int64(len(zs)))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	// The stream is in the last hour of k-1: rolled up to k-1, head k-1.
	if err := rdb.HSet(ctx, store.Key(rolloverPrefix, tag, store.KindMeta, ""), "st", prev.Start.Add(23*time.Hour).UnixMilli(),
		"head", prev.Start.UnixMilli(), "rolled", prev.Start.UnixMilli()).Err(); err != nil {
		return nil, err
	}
	if err := rdb.SAdd(ctx, rolloverPrefix+":dims:"+rolloverBoard, tag).Err(); err != nil {
		return nil, err
	}
	// flush set SLOWLOG to keep every call over 1 ms (resetStats); only
	// the rollover's are wanted, not the prefill's
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return nil, err
	}

	// The reader.
	reader := redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: 1})
	defer reader.Close()
	var lat []time.Duration
	var readErr error
	rctx, stopReader := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for rctx.Err() == nil {
			t0 := time.Now()
			if err := reader.ZRevRangeWithScores(rctx, prevKey, 0, 9).Err(); err != nil {
				if rctx.Err() == nil {
					readErr = err
				}
				return
			}
			lat = append(lat, time.Since(t0))
			select {
			case <-rctx.Done():
			case <-time.After(readerPause):
			}
		}
	})
	time.Sleep(50 * time.Millisecond) // the reader is going
	e.prog.set(fmt.Sprintf("rollover of %d members", n), nil)
	steal := readSteal()
	wait0, pre0, waitOK := pidWait(e.redisPID)
	start := time.Now()
	err = st.Rollover(ctx, rolloverBoard, k.Start.Add(time.Hour))
	el := time.Since(start)
	stealPct := steal.stealPct()
	wait1, pre1, waitOK1 := pidWait(e.redisPID)
	time.Sleep(50 * time.Millisecond)
	stopReader()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if readErr != nil {
		return nil, fmt.Errorf("reader: %w", readErr)
	}
	got, err := rdb.ZCard(ctx, store.Key(rolloverPrefix, tag, store.KindRolling, k.ID)).Result()
	if err != nil {
		return nil, err
	}
	if want := int64(n - (n+2)/3); got != want {
		return nil, fmt.Errorf("S(k) has %d members after the rollover, want %d", got, want)
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, err
	}
	r := &Rollover{Members: n, Seconds: round(el.Seconds(), 2), MembersPerSec: round(float64(n)/el.Seconds(), 0), ReaderCalls: len(lat)}
	var worst time.Duration
	for _, l := range logs {
		if l.Duration > worst && len(l.Args) > 0 {
			worst, r.SlowestCall = l.Duration, fmt.Sprint(l.Args[0])
		}
	}
	r.SlowestCallMs = ms(worst)
	r.StealPct = stealPct
	r.RedisWaitMs, r.RedisPreempted = -1, -1
	if waitOK && waitOK1 {
		r.RedisWaitMs, r.RedisPreempted = ms(wait1-wait0), pre1-pre0
	}
	slices.Sort(lat)
	r.ReaderP50Ms, r.ReaderP99Ms, r.ReaderMaxMs = ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)), ms(quantile(lat, 1))
	for _, l := range lat {
		if l > 5*time.Millisecond {
			r.ReaderOver5ms++
		}
	}
	return r, nil
}
