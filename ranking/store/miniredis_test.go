package store_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/oracle"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// `rankd dev` falls back to miniredis, an in-process Redis whose Lua is
// gopher-lua, when no redis-server is on PATH. These tests prove the
// scripts (apply, rollover, dense rank) behave the same there.

// TestExactnessMiniredis runs a reduced exactness check (a few seeds, a few
// hundred events each: duplicates, crashes, lateness, rollovers, reads)
// against miniredis. It needs no server, so it never skips.
func TestExactnessMiniredis(t *testing.T) {
	seeds, _, _ := exactPlan(t, 501, 4)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runExact(t, miniClient(t), seed, 300, 4*24*time.Hour)
		})
	}
}

// TestQueriesMiniredis applies the same workload to miniredis and to a
// redisStore Redis and compares what the read side answers on both: Top in every
// rank mode, Member and Around (the dense rank runs a script of its own).
func TestQueriesMiniredis(t *testing.T) {
	const seed = 601
	ctx := t.Context()
	boards := oracle.Boards()
	clock := store.WithClock(func() time.Time { return time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC) })
	prefix := testenv.Prefix(t) // the same on both: errors name keys
	mini, err := store.New(miniClient(t), boards, store.WithPrefix(prefix), clock)
	if err != nil {
		t.Fatal(err)
	}
	redisStore, err := store.New(testenv.Redis(t).Client(t), boards, store.WithPrefix(prefix), clock)
	if err != nil {
		t.Fatal(err)
	}
	orc := oracle.New(boards)
	for _, call := range oracle.Workload(seed, 400, boards, oracle.GenOptions{}) {
		orc.Apply(call)
		for _, s := range []*store.Store{mini, redisStore} {
			if _, err := s.Apply(ctx, store.Group(call)); err != nil {
				t.Fatalf("seed %d: apply: %v", seed, err)
			}
		}
	}
	modes := []store.RankMode{store.RankRow, store.RankCompetition, store.RankDense}
	same := func(what string, q func(s *store.Store) (any, error)) {
		t.Helper()
		want, werr := q(redisStore)
		got, gerr := q(mini)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: %s:\nminiredis  %+v (err %v)\nredis      %+v (err %v)", seed, what, got, gerr, want, werr)
		}
	}
	queries := 0
	for _, st := range orc.Streams() {
		ps := orc.Periods(st.Board, st.Dims)
		for _, p := range []string{ps[0], ps[len(ps)-1]} {
			for _, mode := range modes {
				name := fmt.Sprintf("%s%q %s %v", st.Board, st.Dims, p, mode)
				same("top "+name, func(s *store.Store) (any, error) { return s.Top(ctx, st.Board, st.Dims, p, 50, mode) })
				top, err := redisStore.Top(ctx, st.Board, st.Dims, p, 5, mode)
				if err != nil {
					t.Fatal(err)
				}
				members := []string{"absent member"}
				for _, e := range top.Entries {
					members = append(members, e.Member)
				}
				for _, m := range members {
					same(fmt.Sprintf("member %q %s", m, name), func(s *store.Store) (any, error) {
						return s.Member(ctx, st.Board, st.Dims, m, p, mode)
					})
					same(fmt.Sprintf("around %q %s", m, name), func(s *store.Store) (any, error) {
						return s.Around(ctx, st.Board, st.Dims, m, p, 2, mode)
					})
					queries += 2
				}
				queries++
			}
		}
	}
	t.Logf("seed %d: %d streams, %d queries answered alike", seed, len(orc.Streams()), queries)
}

// miniClient returns a client of a new miniredis, both closed at t's end.
func miniClient(t *testing.T) *redis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestArgsProbe: a store sends its apply calls' arguments as plain ARGV
// strings to a server whose scripts have no cmsgpack (miniredis) and as
// msgpack to Redis, and decides nothing while the server cannot be
// reached (the apply fails as unavailable, and the next one probes again).
func TestArgsProbe(t *testing.T) {
	ctx := t.Context()
	boards := oracle.Boards()
	ev := []store.Event{{ID: "m1", Updates: []ranking.Update{{Board: boards[0].Name, Member: "a", Value: 1,
		Time: time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)}}}}
	for _, b := range boards[0].Dims {
		ev[0].Updates[0].Dims = append(ev[0].Updates[0].Dims, "d"+b)
	}
	mini, err := store.New(miniClient(t), boards)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mini.Apply(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if got := mini.Args(); got != "plain" {
		t.Errorf("miniredis: arguments sent as %q, want plain", got)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	mr.Close() // nothing listens there any more
	down, err := store.New(rdb, boards)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.Apply(ctx, ev); !store.IsUnavailable(err) {
		t.Fatalf("apply with Redis down: %v, want an unavailable error", err)
	}
	if got := down.Args(); got != "" {
		t.Errorf("Redis down: arguments decided as %q, want undecided", got)
	}
	// the probe itself (the apply above fails before it, reading the
	// generations): Redis down decides nothing, miniredis gets plain ARGV,
	// Redis msgpack
	if m, err := store.ProbeArgs(ctx, rdb); m != "" || !store.IsUnavailable(err) {
		t.Errorf("probe with Redis down: decided %q, err %v; want nothing and an unavailable error", m, err)
	}
	if m, err := store.ProbeArgs(ctx, miniClient(t)); m != "a" || err != nil {
		t.Errorf("probe on miniredis: decided %q, err %v; want a (plain)", m, err)
	}
	if m, err := store.ProbeArgs(ctx, testenv.Redis(t).Client(t)); m != "m" || err != nil {
		t.Errorf("probe on Redis: decided %q, err %v; want m (msgpack)", m, err)
	}
}
