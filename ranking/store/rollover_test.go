package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestRolloverResume resumes prefills of S(k) that stopped after a chunk
// (the meta hash names k and the cursor, "<score>:<member>" of S(k-1)) and
// checks which members the rest of the walk writes: exactly those after the
// cursor in S(k-1)'s order (score, then member bytes), also when an event
// moved the cursor's member meanwhile. Members before the cursor are left
// out of S(k) on purpose here: a walk that went back would write them.
func TestRolloverResume(t *testing.T) {
	srv := testenv.Redis(t)
	unit, _ := ranking.ParseUnit("1d")
	b := &ranking.Board{Name: "r7", Window: ranking.WindowRolling, Every: unit, Periods: 7, Grace: 5 * time.Minute}
	cal := b.Calendar()
	k := cal.At(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	prev := cal.Prev(k)
	tag := store.Tag("r7", nil)
	// S(k-1); the run scored 5 in byte order: "B" < "a" < "b" < "c" < "d"
	sPrev := []redis.Z{{Score: 1, Member: "z"}, {Score: 5, Member: "B"}, {Score: 5, Member: "a"}, {Score: 5, Member: "b"},
		{Score: 5, Member: "c"}, {Score: 5, Member: "d"}, {Score: 9, Member: "y"}}
	for _, tc := range []struct {
		name   string
		cursor string
		moved  map[string]float64 // S(k-1) members an event moved after the cursor was written
		inK    []redis.Z          // S(k) before the resume (members moved by an event are there)
		want   []redis.Z          // S(k) after it
	}{{
		name:   "cursor in place",
		cursor: "5:b",
		want:   []redis.Z{{Score: 5, Member: "c"}, {Score: 5, Member: "d"}, {Score: 9, Member: "y"}},
	}, {
		name:   "cursor member moved up",
		cursor: "5:b",
		moved:  map[string]float64{"b": 7},
		inK:    []redis.Z{{Score: 7, Member: "b"}},
		want:   []redis.Z{{Score: 5, Member: "c"}, {Score: 5, Member: "d"}, {Score: 7, Member: "b"}, {Score: 9, Member: "y"}},
	}, {
		name:   "cursor member moved, first of its run by bytes",
		cursor: "5:B",
		moved:  map[string]float64{"B": 6},
		inK:    []redis.Z{{Score: 6, Member: "B"}},
		want: []redis.Z{{Score: 5, Member: "a"}, {Score: 5, Member: "b"}, {Score: 5, Member: "c"}, {Score: 5, Member: "d"},
			{Score: 6, Member: "B"}, {Score: 9, Member: "y"}},
	}, {
		name:   "cursor member moved, last of its run",
		cursor: "5:d",
		moved:  map[string]float64{"d": 2},
		inK:    []redis.Z{{Score: 2, Member: "d"}},
		want:   []redis.Z{{Score: 2, Member: "d"}, {Score: 9, Member: "y"}},
	}, {
		name:   "cursor of an older build (ZSCAN): from the start",
		cursor: "1234",
		want: []redis.Z{{Score: 1, Member: "z"}, {Score: 5, Member: "B"}, {Score: 5, Member: "a"}, {Score: 5, Member: "b"},
			{Score: 5, Member: "c"}, {Score: 5, Member: "d"}, {Score: 9, Member: "y"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			rdb := srv.Client(t)
			prefix := testenv.Prefix(t)
			// chunks of 2: the resumed walk takes several
			st, err := store.New(rdb, []*ranking.Board{b}, store.WithPrefix(prefix), store.WithRolloverChunk(2))
			if err != nil {
				t.Fatal(err)
			}
			prevKey := store.Key(prefix, tag, store.KindRolling, prev.ID)
			kKey := store.Key(prefix, tag, store.KindRolling, k.ID)
			noErr(t, rdb.ZAdd(ctx, prevKey, sPrev...).Err())
			for m, s := range tc.moved {
				noErr(t, rdb.ZAdd(ctx, prevKey, redis.Z{Score: s, Member: m}).Err())
			}
			if len(tc.inK) > 0 {
				noErr(t, rdb.ZAdd(ctx, kKey, tc.inK...).Err())
			}
			noErr(t, rdb.HSet(ctx, store.Key(prefix, tag, store.KindMeta, ""), "st", prev.Start.Add(23*time.Hour).UnixMilli(),
				"head", k.Start.UnixMilli(), "rolled", prev.Start.UnixMilli(), "roll_k", k.ID, "roll_cursor", tc.cursor).Err())
			noErr(t, rdb.SAdd(ctx, prefix+":dims:r7", tag).Err())
			if err := st.Rollover(ctx, "r7", k.Start.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			got := zrange(ctx, t, rdb, kKey)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("S(k) after the resumed prefill:\n got %v\nwant %v", got, tc.want)
			}
			if v, err := rdb.HMGet(ctx, store.Key(prefix, tag, store.KindMeta, ""), "roll_k", "roll_cursor").Result(); err != nil || v[0] != nil || v[1] != nil {
				t.Fatalf("meta after the prefill: roll_k, roll_cursor = %v (%v), want both gone", v, err)
			}
		})
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func zrange(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key string) []redis.Z {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return zs
}
