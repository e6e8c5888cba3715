package ingest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking"
)

func mustUnit(t testing.TB, s string) ranking.Unit {
	t.Helper()
	u, err := ranking.ParseUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// testBoards mirrors the example config, plus a multi-factor and a decimal
// board.
func testBoards(t testing.TB) []*ranking.Board {
	t.Helper()
	m30, day := mustUnit(t, "30m"), mustUnit(t, "1d")
	return []*ranking.Board{
		{Name: "anchor_hot_30m", Window: ranking.WindowPeriodic, Every: m30, Tiebreak: ranking.TieFirst},
		{Name: "anchor_hot_zone_30m", Window: ranking.WindowPeriodic, Every: m30, Tiebreak: ranking.TieFirst, Dims: []string{"zone"}},
		{Name: "anchor_luck_day", Window: ranking.WindowPeriodic, Every: day},
		{Name: "anchor_luck_total", Window: ranking.WindowTotal},
		{Name: "user_rich_room_day", Window: ranking.WindowPeriodic, Every: day, Dims: []string{"room_id"}},
		{Name: "anchor_7d", Window: ranking.WindowRolling, Every: day, Periods: 7},
		{Name: "anchor_likes_day", Window: ranking.WindowPeriodic, Every: day},
		{Name: "hot_news", Window: ranking.WindowTotal, HasBase: true, KeepTop: 1000},
		{Name: "anchor_total", Window: ranking.WindowTotal},
		{Name: "stage", Window: ranking.WindowTotal, Aggregate: ranking.AggMax, Tiebreak: ranking.TieFirst, Sort: []ranking.SortField{
			{Name: "clear_ms", Order: ranking.Asc, Bits: 20}, {Name: "vip", Order: ranking.Desc, Bits: 4}}},
		{Name: "ratio", Window: ranking.WindowTotal, Decimals: 2, Aggregate: ranking.AggLast},
	}
}

func testRoutes() []Route {
	return []Route{
		{Topic: "gift", When: `gift_id == "ice_castle"`, Member: "anchor_id", Score: "count",
			Boards: []string{"anchor_luck_day", "anchor_luck_total"}},
		{Topic: "gift", Member: "anchor_id", Score: "coins",
			Boards: []string{"anchor_hot_30m", "anchor_hot_zone_30m", "anchor_7d", "anchor_total"}},
		{Topic: "gift", Member: "user_id", Score: "coins", Boards: []string{"user_rich_room_day"}},
		{Topic: "like", Member: "anchor_id", Score: "count", Boards: []string{"anchor_likes_day"}},
		{Topic: "comment", When: `news_id != ""`, Member: "news_id", Score: "432", Base: "news_ts / 1000",
			Boards: []string{"hot_news"}},
	}
}

func testRouter(t testing.TB, extra ...Route) *Router {
	t.Helper()
	ss := testSchemas(t)
	ss["game"] = &Schema{IDField: "id", TSField: "ts", Fields: []Field{
		{Name: "player", Type: TypeString}, {Name: "level", Type: TypeInt},
		{Name: "clear_ms", Type: TypeInt}, {Name: "vip", Type: TypeInt},
		{Name: "x", Type: TypeFloat}, {Name: "ok", Type: TypeBool},
	}}
	r, err := NewRouter(testBoards(t), ss, append(testRoutes(), extra...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func decodeT(t testing.TB, topic, value string) *Event {
	t.Helper()
	ss := testSchemas(t)
	ss["game"] = &Schema{IDField: "id", TSField: "ts", Fields: []Field{
		{Name: "player", Type: TypeString}, {Name: "level", Type: TypeInt},
		{Name: "clear_ms", Type: TypeInt}, {Name: "vip", Type: TypeInt},
		{Name: "x", Type: TypeFloat}, {Name: "ok", Type: TypeBool},
	}}
	ev, err := ss[topic].Decode(topic, 0, 7, []byte(value), nil, testNow.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// brief renders updates compactly for comparison.
func brief(ups []ranking.Update) string {
	var sb strings.Builder
	for _, u := range ups {
		fmt.Fprintf(&sb, "%s%v %s %d", u.Board, u.Dims, u.Member, u.Value)
		if u.HasBase {
			fmt.Fprintf(&sb, " base %d", u.Base)
		}
		sb.WriteString("; ")
	}
	return sb.String()
}

func TestRoute(t *testing.T) {
	r := testRouter(t,
		Route{Topic: "game", Member: "player", Sort: map[string]string{"clear_ms": "clear_ms", "vip": "vip"}, Boards: []string{"stage"}},
		Route{Topic: "game", When: "ok", Member: "level", Score: "x", Boards: []string{"ratio"}},
	)
	tests := []struct {
		name, topic, value, want string
	}{
		{"ice castle gift", "gift", `{"id":"g1","anchor_id":"a1","user_id":"u1","room_id":"r9","zone":"z3","gift_id":"ice_castle","count":2,"coins":500}`,
			"anchor_luck_day[] a1 2; anchor_luck_total[] a1 2; anchor_hot_30m[] a1 500; anchor_hot_zone_30m[z3] a1 500; " +
				"anchor_7d[] a1 500; anchor_total[] a1 500; user_rich_room_day[r9] u1 500; "},
		{"other gift", "gift", `{"anchor_id":"a1","user_id":"u1","room_id":"r1","zone":"z1","gift_id":"rose","count":1,"coins":1}`,
			"anchor_hot_30m[] a1 1; anchor_hot_zone_30m[z1] a1 1; anchor_7d[] a1 1; anchor_total[] a1 1; user_rich_room_day[r1] u1 1; "},
		{"like default count", "like", `{"anchor_id":"a2"}`, "anchor_likes_day[] a2 1; "},
		{"comment on news", "comment", `{"news_id":"n1","news_ts":1700000000500}`, "hot_news[] n1 432 base 1700000001; "},
		{"comment without news", "comment", `{"anchor_id":"a1"}`, ""},
		{"multi-factor", "game", `{"player":"p","clear_ms":3,"vip":2}`, fmt.Sprintf("stage[] p %d; ", (1<<20-1-3)<<4|2)},
		{"decimals round half away from zero", "game", `{"player":"p","clear_ms":1,"level":-4,"ok":true,"x":-0.125}`,
			fmt.Sprintf("stage[] p %d; ratio[] -4 -13; ", (1<<20-1-1)<<4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := decodeT(t, tt.topic, tt.value)
			ups, err := r.Route(ev)
			if err != nil {
				t.Fatal(err)
			}
			if got := brief(ups); got != tt.want {
				t.Fatalf("updates\n got %s\nwant %s", got, tt.want)
			}
			for _, u := range ups {
				if u.MsgID != ev.ID || !u.Time.Equal(ev.Time) {
					t.Fatalf("update %+v: want MsgID %q time %v", u, ev.ID, ev.Time)
				}
			}
		})
	}
}

func TestRouteErrors(t *testing.T) {
	r := testRouter(t,
		Route{Topic: "game", Member: "player", Sort: map[string]string{"clear_ms": "clear_ms", "vip": "vip"}, Boards: []string{"stage"}},
		Route{Topic: "game", When: "ok", Member: "player", Score: "level % (level - 1)", Boards: []string{"anchor_total"}},
		Route{Topic: "game", When: "!ok && level == 1", Member: "player", Score: "x * 100", Boards: []string{"ratio"}},
		Route{Topic: "game", When: "!ok && level == 2", Member: "player", Score: "x / 0", Boards: []string{"ratio"}},
		Route{Topic: "game", When: "!ok && level == 3", Member: "player", Score: "x", Boards: []string{"anchor_total"}},
	)
	tests := []struct {
		name, topic, value, reason, errPart string
	}{
		{"empty member", "gift", `{"coins":5}`, ReasonNoMember, `"anchor_id"`},
		{"value above the board range", "gift", `{"anchor_id":"a","coins":9007199254740991}`, ReasonOutOfRange, "anchor_hot_30m"},
		// gift coins have min 0: a negative value comes from a schema without bounds
		{"negative value beyond the range", "game", `{"player":"p","level":3,"x":-9007199254740991}`, ReasonOutOfRange, "outside"},
		{"sort factor beyond its bits", "game", `{"player":"p","vip":16}`, ReasonOutOfRange, `"vip"`},
		{"negative sort factor", "game", `{"player":"p","clear_ms":-1}`, ReasonOutOfRange, "clear_ms"},
		{"runtime error", "game", `{"player":"p","ok":true,"level":1}`, ReasonExpression, "divide by zero"},
		{"float beyond int64", "game", `{"player":"p","level":1,"x":1e17}`, ReasonOutOfRange, "does not fit"},
		{"infinite score", "game", `{"player":"p","level":2,"x":1}`, ReasonOutOfRange, "+Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ups, err := r.Route(decodeT(t, tt.topic, tt.value))
			if Reason(err) != tt.reason || !strings.Contains(fmt.Sprint(err), tt.errPart) || ups != nil {
				t.Fatalf("Route = %v, %v; want reason %q containing %q", brief(ups), err, tt.reason, tt.errPart)
			}
		})
	}
	t.Run("no route", func(t *testing.T) {
		if _, err := r.Route(&Event{Topic: "nope"}); Reason(err) != ReasonNoRoute {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("field of the wrong Go type", func(t *testing.T) {
		ev := NewEvent("like", "x", testNow, map[string]any{"anchor_id": "a", "count": 3})
		if _, err := r.Route(ev); Reason(err) != ReasonValidation || !strings.Contains(err.Error(), `"count"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("append keeps dst on error", func(t *testing.T) {
		dst := []ranking.Update{{Board: "keep"}}
		got, err := r.AppendRoute(dst, decodeT(t, "gift", `{"coins":5}`))
		if err == nil || len(got) != 1 || got[0].Board != "keep" {
			t.Fatalf("AppendRoute = %v, %v", got, err)
		}
	})
}

func TestRouteHandBuiltEvent(t *testing.T) {
	r := testRouter(t)
	// Missing fields take defaults; id and ts come from the event.
	ev := NewEvent("comment", "m1", time.UnixMilli(5000), map[string]any{"news_id": "n"})
	ups, err := r.Route(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := brief(ups); got != "hot_news[] n 432 base 0; " {
		t.Fatalf("updates %s", got)
	}
}

func TestNewRouterErrors(t *testing.T) {
	tests := []struct {
		name  string
		route Route
		field string
		part  string
	}{
		{"unknown topic", Route{Topic: "nope", Member: "a", Boards: []string{"anchor_total"}}, "topic", `no schema for topic "nope"`},
		{"unknown field", Route{Topic: "gift", Member: "anchor", Boards: []string{"anchor_total"}}, "member", "unknown name anchor"},
		{"syntax error", Route{Topic: "gift", When: "coins >", Member: "anchor_id", Boards: []string{"anchor_total"}}, "when", `"coins >"`},
		{"when not bool", Route{Topic: "gift", When: "coins", Member: "anchor_id", Boards: []string{"anchor_total"}}, "when", "expected bool"},
		{"member bool", Route{Topic: "gift", Member: "coins > 1", Boards: []string{"anchor_total"}}, "member", "want a string or an integer, got bool"},
		{"member float", Route{Topic: "gift", Member: "coins / 2", Boards: []string{"anchor_total"}}, "member", "got float64"},
		{"no member", Route{Topic: "gift", Boards: []string{"anchor_total"}}, "member", "missing"},
		{"score string", Route{Topic: "gift", Member: "anchor_id", Score: "gift_id", Boards: []string{"anchor_total"}}, "score", "want a number, got string"},
		{"now is disabled", Route{Topic: "gift", Member: "anchor_id", Score: "now().Unix()", Boards: []string{"anchor_total"}}, "score", "unknown name now"},
		{"base string", Route{Topic: "comment", Member: "news_id", Base: "news_id", Boards: []string{"hot_news"}}, "base", "want a number"},
		{"unknown board", Route{Topic: "gift", Member: "anchor_id", Boards: []string{"anchor_total", "nope"}}, "boards[1]", `unknown board "nope"`},
		{"board twice", Route{Topic: "gift", Member: "anchor_id", Boards: []string{"anchor_total", "anchor_total"}}, "boards[1]", `board "anchor_total" is listed twice (also boards[0])`},
		{"no boards", Route{Topic: "gift", Member: "anchor_id"}, "boards", "no boards"},
		{"dims field missing", Route{Topic: "game", Member: "player", Boards: []string{"anchor_hot_zone_30m"}}, "boards[0]", `dims field "zone" is not a field of topic "game"`},
		{"base on a board without base", Route{Topic: "comment", Member: "news_id", Base: "1", Boards: []string{"anchor_total"}}, "base", `board "anchor_total" does not take a base`},
		{"sort missing", Route{Topic: "game", Member: "player", Sort: map[string]string{"vip": "vip"}, Boards: []string{"stage"}}, "boards[0]", `needs sort factor "clear_ms"`},
		{"sort extra", Route{Topic: "game", Member: "player", Sort: map[string]string{"vip": "vip", "clear_ms": "1", "z": "1"}, Boards: []string{"stage"}}, "sort.z", `no board of the route has sort factor "z"`},
		{"sort on a plain board", Route{Topic: "game", Member: "player", Sort: map[string]string{"vip": "vip", "clear_ms": "1"}, Boards: []string{"stage", "anchor_total"}}, "boards[1]", "has no sort factors"},
		{"score on sort boards", Route{Topic: "game", Member: "player", Score: "1", Sort: map[string]string{"vip": "vip", "clear_ms": "1"}, Boards: []string{"stage"}}, "score", "give sort instead"},
		{"sort factor not numeric", Route{Topic: "game", Member: "player", Sort: map[string]string{"vip": "player", "clear_ms": "1"}, Boards: []string{"stage"}}, "sort.vip", "want a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := testSchemas(t)
			ss["game"] = &Schema{IDField: "id", TSField: "ts", Fields: []Field{
				{Name: "player", Type: TypeString}, {Name: "clear_ms", Type: TypeInt}, {Name: "vip", Type: TypeInt}}}
			routes := append(testRoutes(), tt.route)
			_, err := NewRouter(testBoards(t), ss, routes)
			var re *RouteError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RouteError", err)
			}
			if re.Index != len(routes)-1 || re.Field != tt.field || !strings.Contains(re.Err.Error(), tt.part) {
				t.Fatalf("err = %v (index %d field %q), want routes[%d].%s containing %q", err, re.Index, re.Field, len(routes)-1, tt.field, tt.part)
			}
		})
	}
}

func TestNewRouterReportsAllErrors(t *testing.T) {
	routes := []Route{
		{Topic: "gift", Member: "nope", Boards: []string{"anchor_total"}},
		{Topic: "gift", Member: "anchor_id", Score: "x", Boards: []string{"missing"}},
	}
	_, err := NewRouter(testBoards(t), testSchemas(t), routes)
	var n int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var re *RouteError
		if errors.As(e, &re) {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("got %d route errors, want 3: %v", n, err)
	}
}

func TestRouteConcurrent(t *testing.T) {
	r := testRouter(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				ev := decodeT(t, "gift", fmt.Sprintf(`{"anchor_id":"a%d","user_id":"u","room_id":"r","zone":"z%d","coins":%d}`, w, i, i+w))
				ups, err := r.Route(ev)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ups) != 5 || ups[0].Member != fmt.Sprint("a", w) || ups[0].Value != int64(i+w) || ups[1].Dims[0] != fmt.Sprint("z", i) {
					t.Errorf("worker %d event %d: %s", w, i, brief(ups))
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestFixed(t *testing.T) {
	tests := []struct {
		n    number
		d    int
		want int64
		ok   bool
	}{
		{number{i: 7}, 0, 7, true},
		{number{i: 7}, 3, 7000, true},
		{number{i: math.MaxInt64 / 10}, 1, math.MaxInt64 / 10 * 10, true},
		{number{i: math.MaxInt64/10 + 1}, 1, 0, false},
		{number{i: math.MinInt64 / 100}, 2, math.MinInt64 / 100 * 100, true},
		{number{f: 2.5, isFloat: true}, 0, 3, true},
		{number{f: -2.5, isFloat: true}, 0, -3, true},
		{number{f: 0.125, isFloat: true}, 2, 13, true},
		{number{f: 9.3e18, isFloat: true}, 0, 0, false},
		{number{f: -9.223372036854775808e18, isFloat: true}, 0, math.MinInt64, true},
	}
	for _, tt := range tests {
		got, err := tt.n.fixed("score", tt.d)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("%+v.fixed(%d) = %d, %v; want %d ok=%v", tt.n, tt.d, got, err, tt.want, tt.ok)
		}
	}
}

// BenchmarkRoute measures routing one decoded event of each topic with the
// example config's routes (gift: 3 routes, 7 boards).
func BenchmarkRoute(b *testing.B) {
	r := testRouter(b)
	events := map[string]string{
		"gift":    `{"id":"g1","ts":1763700000000,"user_id":"u123456","anchor_id":"a4242","room_id":"r77","zone":"3","gift_id":"ice_castle","count":2,"coins":5200}`,
		"like":    `{"id":"l1","ts":1763700000000,"user_id":"u123456","anchor_id":"a4242","room_id":"r77","zone":"3","count":1}`,
		"comment": `{"id":"c1","ts":1763700000000,"user_id":"u123456","anchor_id":"a4242","room_id":"r77","zone":"3","news_id":"n99","news_ts":1763600000000,"text":"hi"}`,
	}
	for _, topic := range []string{"gift", "like", "comment"} {
		ev := decodeT(b, topic, events[topic])
		b.Run(topic, func(b *testing.B) {
			b.ReportAllocs()
			var buf []ranking.Update
			for b.Loop() {
				var err error
				if buf, err = r.AppendRoute(buf[:0], ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeRoute measures decoding plus routing of a gift message.
func BenchmarkDecodeRoute(b *testing.B) {
	r := testRouter(b)
	s := testSchemas(b)["gift"]
	msg := []byte(`{"id":"g1","ts":1763700000000,"user_id":"u123456","anchor_id":"a4242","room_id":"r77","zone":"3","gift_id":"ice_castle","count":2,"coins":5200}`)
	b.ReportAllocs()
	var buf []ranking.Update
	for b.Loop() {
		ev, err := s.Decode("gift", 0, 1, msg, nil, testNow)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = r.AppendRoute(buf[:0], ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRouteMissingDims: a field a board's dims need must be in the event,
// unless the schema gives it a default; otherwise the event is rejected
// (validation) instead of landing on the "" board of that dim.
func TestRouteMissingDims(t *testing.T) {
	r := testRouter(t)
	for _, tt := range []struct{ name, value, err string }{
		{"no room_id", `{"anchor_id":"a1","user_id":"u1","zone":"z1","coins":1}`,
			`validation: board "user_rich_room_day": missing dims field "room_id" (give it, or a default under topics.gift.fields)`},
		{"null zone", `{"anchor_id":"a1","user_id":"u1","room_id":"r1","zone":null,"coins":1}`,
			`validation: board "anchor_hot_zone_30m": missing dims field "zone" (give it, or a default under topics.gift.fields)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ups, err := r.Route(decodeT(t, "gift", tt.value))
			if err == nil || Reason(err) != ReasonValidation || err.Error() != tt.err || ups != nil {
				t.Fatalf("Route = %s, %v; want error %s", brief(ups), err, tt.err)
			}
		})
	}
	// An empty value given explicitly is a value.
	if ups, err := r.Route(decodeT(t, "gift", `{"anchor_id":"a1","user_id":"u1","room_id":"","zone":"","coins":1}`)); err != nil || len(ups) != 5 {
		t.Fatalf("explicit empty dims: %s, %v", brief(ups), err)
	}
	// With a default in the schema, a missing field takes it.
	ss := testSchemas(t)
	for i, f := range ss["gift"].Fields {
		if f.Name == "room_id" || f.Name == "zone" {
			ss["gift"].Fields[i].Default = "unknown"
		}
	}
	rd, err := NewRouter(testBoards(t), ss, testRoutes())
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ss["gift"].Decode("gift", 0, 7, []byte(`{"anchor_id":"a1","user_id":"u1","coins":1}`), nil, testNow.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ups, err := rd.Route(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := brief(ups), "anchor_hot_30m[] a1 1; anchor_hot_zone_30m[unknown] a1 1; anchor_7d[] a1 1; anchor_total[] a1 1; user_rich_room_day[unknown] u1 1; "; got != want {
		t.Fatalf("with defaults:\n got %s\nwant %s", got, want)
	}
}
