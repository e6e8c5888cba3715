package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// now is the store's clock in every test: Saturday 2026-11-21 12:00 UTC.
var now = at(21, 12, 0, 0)

func at(day, h, m, s int) time.Time { return time.Date(2026, 11, day, h, m, s, 0, time.UTC) }

func unit(t testing.TB, s string) ranking.Unit {
	t.Helper()
	u, err := ranking.ParseUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// fixtureBoards are the boards of every test:
//   - day: daily sum, tiebreak first, 2 decimals (ties, trends, decoded values)
//   - zone: daily sum with dims zone and room, no tiebreak (dims, rank modes)
//   - tot: total sum (no previous period, so no trend)
//   - line: total max with dims g (around: g=many has 6 members, g=one 1)
//   - kd: total multi-factor (kills desc, deaths asc), tiebreak first, 1m ties
//   - r3: rolling 3 days, tiebreak last (ties counted from the window start)
//   - kt: total sum keeping the top 2 (approximate ranks)
//   - wk: weekly sum, weeks starting on Sunday (no data)
func fixtureBoards(t testing.TB) []*ranking.Board {
	d1 := unit(t, "1d")
	w1 := unit(t, "1w")
	return []*ranking.Board{
		{Name: "day", Title: "Gifts today", Window: ranking.WindowPeriodic, Every: d1, Tiebreak: ranking.TieFirst, Decimals: 2, Grace: time.Hour},
		{Name: "zone", Title: "Likes per room", Window: ranking.WindowPeriodic, Every: d1, Dims: []string{"zone", "room"}, Grace: time.Hour},
		{Name: "tot", Title: "All time", Window: ranking.WindowTotal},
		{Name: "line", Window: ranking.WindowTotal, Dims: []string{"g"}, Aggregate: ranking.AggMax},
		{Name: "kd", Title: "Kills", Window: ranking.WindowTotal, Aggregate: ranking.AggMax, Tiebreak: ranking.TieFirst, TieUnit: time.Minute,
			Sort: []ranking.SortField{{Name: "kills", Order: ranking.Desc, Bits: 16}, {Name: "deaths", Order: ranking.Asc, Bits: 16}}},
		{Name: "r3", Window: ranking.WindowRolling, Every: d1, Periods: 3, Tiebreak: ranking.TieLast, Grace: time.Hour},
		{Name: "kt", Window: ranking.WindowTotal, KeepTop: 2},
		{Name: "wk", Title: "This week", Window: ranking.WindowPeriodic, Every: w1, WeekStart: time.Sunday, Grace: time.Hour},
	}
}

// fixture returns a store with the fixture boards and data (under a prefix
// of t's own) and an HTTP server of its API.
func fixture(t testing.TB, opts ...httpapi.Option) (*httptest.Server, *store.Store) {
	t.Helper()
	return fixtureOn(t, testenv.Redis(t).Client(t), opts...)
}

// fixtureOn is fixture on the Redis of rdb.
func fixtureOn(t testing.TB, rdb redis.UniversalClient, opts ...httpapi.Option) (*httptest.Server, *store.Store) {
	t.Helper()
	return fixtureAt(t, rdb, testenv.Prefix(t), opts...)
}

// fixtureAt is fixture on the Redis of rdb under prefix.
func fixtureAt(t testing.TB, rdb redis.UniversalClient, prefix string, opts ...httpapi.Option) (*httptest.Server, *store.Store) {
	t.Helper()
	st, err := store.New(rdb, fixtureBoards(t), store.WithPrefix(prefix),
		store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	pack := func(kills, deaths int64) int64 {
		v, err := ranking.PackSort(fixtureBoards(t)[4].Sort, []int64{kills, deaths})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	id := 0
	up := func(board string, dims []string, member string, value int64, tm time.Time) ranking.Update {
		id++
		return ranking.Update{Board: board, Dims: dims, Member: member, Value: value, Time: tm, MsgID: fmt.Sprint("m", id)}
	}
	zone := []string{"3", "7"}
	odd := []string{"3", "a:b,c d/é"}
	ups := []ranking.Update{
		// day, previous period (Nov 20): c 9.00, a 8.00, d 1.00
		up("day", nil, "c", 900, at(20, 9, 0, 0)),
		up("day", nil, "a", 800, at(20, 9, 0, 0)),
		up("day", nil, "d", 100, at(20, 9, 0, 0)),
		// day, current period (Nov 21): a 12.50, b 10.00 (09:00), c 10.00
		// (11:00, after b: ranks below it), d 5.00, e 0.05
		up("day", nil, "a", 1000, at(21, 9, 30, 0)),
		up("day", nil, "a", 250, at(21, 10, 0, 0)),
		up("day", nil, "b", 1000, at(21, 9, 0, 0)),
		up("day", nil, "c", 1000, at(21, 11, 0, 0)),
		up("day", nil, "d", 500, at(21, 8, 0, 0)),
		up("day", nil, "e", 5, at(21, 8, 0, 0)),
		// zone 3 room 7: y 30, x 30, z 20, w 10 (equal values: byte order,
		// reversed on a desc board); previous period: z 40, x 1
		up("zone", zone, "z", 40, at(20, 10, 0, 0)),
		up("zone", zone, "x", 1, at(20, 10, 0, 0)),
		up("zone", zone, "x", 30, at(21, 10, 0, 0)),
		up("zone", zone, "y", 30, at(21, 10, 0, 0)),
		up("zone", zone, "z", 20, at(21, 10, 0, 0)),
		up("zone", zone, "w", 10, at(21, 10, 0, 0)),
		up("zone", odd, "q/1", 5, at(21, 10, 0, 0)),
		// tot
		up("tot", nil, "m1", 7, at(3, 1, 0, 0)),
		up("tot", nil, "m2", 3, at(21, 1, 0, 0)),
		// line: g=many 60, 50, 40, 30, 20, 10; g=one a single member
		up("line", []string{"many"}, "la", 60, at(21, 1, 0, 0)),
		up("line", []string{"many"}, "lb", 50, at(21, 1, 0, 0)),
		up("line", []string{"many"}, "lc", 40, at(21, 1, 0, 0)),
		up("line", []string{"many"}, "ld", 30, at(21, 1, 0, 0)),
		up("line", []string{"many"}, "le", 20, at(21, 1, 0, 0)),
		up("line", []string{"many"}, "lf", 10, at(21, 1, 0, 0)),
		up("line", []string{"one"}, "only", 1, at(21, 1, 0, 0)),
		// kd: p3 (12 kills, 9 deaths), p1 (10, 2) at 10:00, p2 (10, 5)
		up("kd", nil, "p1", pack(10, 2), at(21, 10, 0, 30)),
		up("kd", nil, "p2", pack(10, 5), at(21, 9, 0, 0)),
		up("kd", nil, "p3", pack(12, 9), at(21, 11, 15, 0)),
		// r3: window Nov 19..21: u1 5 + 1 (tie: Nov 20 01:00), u2 5
		up("r3", nil, "u1", 5, at(19, 6, 0, 0)),
		up("r3", nil, "u1", 1, at(20, 1, 0, 0)),
		up("r3", nil, "u2", 5, at(21, 7, 30, 15)),
		// kt: k1 3, k2 2, k3 1; only the top 2 stay in the sorted set
		up("kt", nil, "k1", 3, at(21, 1, 0, 0)),
		up("kt", nil, "k2", 2, at(21, 1, 0, 0)),
		up("kt", nil, "k3", 1, at(21, 1, 0, 0)),
	}
	res, err := st.Apply(t.Context(), store.Group(ups))
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range res.Status {
		if st != ranking.StatusApplied {
			t.Fatalf("update %d (%+v): %v", i, ups[i], st)
		}
	}
	srv := httptest.NewServer(httpapi.New(st, opts...))
	t.Cleanup(srv.Close)
	return srv, st
}

// get fetches url and returns the status, the JSON body decoded with
// json.Number values and the response.
func get(t *testing.T, url string) (int, any, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, decode(t, body), resp
}

func decode(t *testing.T, body []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return v
}

// sameJSON fails t unless got equals the JSON text want, numbers compared
// as written (12.5 is not 12.50).
func sameJSON(t *testing.T, got any, want string) {
	t.Helper()
	w := decode(t, []byte(want))
	if !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		e, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("got\n%s\nwant\n%s", g, e)
	}
}
