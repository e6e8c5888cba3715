package httpapi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rankd/rankd/ranking/store"
)

const (
	today     = `{"id":"20261121","start":"2026-11-21T00:00:00Z","end":"2026-11-22T00:00:00Z","final":false}`
	yesterday = `{"id":"20261120","start":"2026-11-20T00:00:00Z","end":"2026-11-21T00:00:00Z","final":false}`
	allTime   = `{"id":"all"}`
)

// head is the JSON of a page without its entries: board, dims, period,
// mode, count, complete, approx (and for around, the member).
func head(board, dims, period, mode string, count int, complete, approx bool, member string) string {
	s := `"board":"` + board + `","dims":` + dims + `,"period":` + period + `,"rank_mode":"` + mode + `","count":` + itoa(count) +
		`,"complete":` + btoa(complete) + `,"rank_approx":` + btoa(approx)
	if member != "" {
		s += `,"member":"` + member + `"`
	}
	return s
}

func page(head, entries string) string { return "{" + head + `,"entries":` + entries + "}" }

func itoa(n int) string { return strconv.Itoa(n) }

func btoa(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestBoards(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	status, body, resp := get(t, srv.URL+"/v1/boards")
	if status != 200 {
		t.Fatalf("status %d: %v", status, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	sameJSON(t, body, `{"boards":[
	{"name":"day","title":"Gifts today","window":"periodic","every":"1d","timezone":"UTC","dims":[],"aggregate":"sum","order":"desc",
	 "tiebreak":"first","tie_unit":"1s","decimals":2,"keep_top":0,"current":"20261121","previous":"20261120"},
	{"name":"zone","title":"Likes per room","window":"periodic","every":"1d","timezone":"UTC","dims":["zone","room"],"aggregate":"sum",
	 "order":"desc","tiebreak":"none","decimals":0,"keep_top":0,"current":"20261121","previous":"20261120"},
	{"name":"tot","title":"All time","window":"total","timezone":"UTC","dims":[],"aggregate":"sum","order":"desc","tiebreak":"none",
	 "decimals":0,"keep_top":0,"current":"all","previous":"all"},
	{"name":"line","title":"","window":"total","timezone":"UTC","dims":["g"],"aggregate":"max","order":"desc","tiebreak":"none",
	 "decimals":0,"keep_top":0,"current":"all","previous":"all"},
	{"name":"kd","title":"Kills","window":"total","timezone":"UTC","dims":[],"aggregate":"max","order":"desc","tiebreak":"first",
	 "tie_unit":"1m","decimals":0,"keep_top":0,"sort":[{"name":"kills","order":"desc","bits":16},{"name":"deaths","order":"asc","bits":16}],
	 "current":"all","previous":"all"},
	{"name":"r3","title":"","window":"rolling","every":"1d","periods":3,"timezone":"UTC","dims":[],"aggregate":"sum","order":"desc",
	 "tiebreak":"last","tie_unit":"1s","decimals":0,"keep_top":0,"current":"20261121","previous":"20261120"},
	{"name":"kt","title":"","window":"total","timezone":"UTC","dims":[],"aggregate":"sum","order":"desc","tiebreak":"none",
	 "decimals":0,"keep_top":2,"current":"all","previous":"all"},
	{"name":"wk","title":"This week","window":"periodic","every":"1w","timezone":"UTC","week_start":"sunday","dims":[],"aggregate":"sum",
	 "order":"desc","tiebreak":"none","decimals":0,"keep_top":0,"current":"2026W46","previous":"2026W45"}]}`)
}

func TestTop(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	zone := `{"zone":"3","room":"7"}`
	tests := []struct {
		name, path, want string
	}{
		{"decoded values, tie times and trends", "/v1/boards/day/top?trend=1", page(head("day", "{}", today, "row", 5, true, false, ""), `[
			{"rank":1,"member":"a","value":12.5,"raw":1250,"tie_time":"2026-11-21T10:00:00Z","prev_rank":2,"trend":"up"},
			{"rank":2,"member":"b","value":10,"raw":1000,"tie_time":"2026-11-21T09:00:00Z","trend":"new"},
			{"rank":3,"member":"c","value":10,"raw":1000,"tie_time":"2026-11-21T11:00:00Z","prev_rank":1,"trend":"down"},
			{"rank":4,"member":"d","value":5,"raw":500,"tie_time":"2026-11-21T08:00:00Z","prev_rank":3,"trend":"down"},
			{"rank":5,"member":"e","value":0.05,"raw":5,"tie_time":"2026-11-21T08:00:00Z","trend":"new"}]`)},
		{"limit, no trend", "/v1/boards/day/top?limit=2&period=current", page(head("day", "{}", today, "row", 5, true, false, ""), `[
			{"rank":1,"member":"a","value":12.5,"raw":1250,"tie_time":"2026-11-21T10:00:00Z"},
			{"rank":2,"member":"b","value":10,"raw":1000,"tie_time":"2026-11-21T09:00:00Z"}]`)},
		{"previous period", "/v1/boards/day/top?period=previous", page(head("day", "{}", yesterday, "row", 3, true, false, ""), `[
			{"rank":1,"member":"c","value":9,"raw":900,"tie_time":"2026-11-20T09:00:00Z"},
			{"rank":2,"member":"a","value":8,"raw":800,"tie_time":"2026-11-20T09:00:00Z"},
			{"rank":3,"member":"d","value":1,"raw":100,"tie_time":"2026-11-20T09:00:00Z"}]`)},
		{"period id", "/v1/boards/day/top?period=20261120&limit=1", page(head("day", "{}", yesterday, "row", 3, true, false, ""), `[
			{"rank":1,"member":"c","value":9,"raw":900,"tie_time":"2026-11-20T09:00:00Z"}]`)},
		{"empty period", "/v1/boards/day/top?period=20261101&trend=1",
			page(head("day", "{}", `{"id":"20261101","start":"2026-11-01T00:00:00Z","end":"2026-11-02T00:00:00Z","final":false}`, "row", 0, true, false, ""), `[]`)},
		{"dims, row ranks of ties", "/v1/boards/zone/top?dims=zone:3,room:7&trend=1", page(head("zone", zone, today, "row", 4, true, false, ""), `[
			{"rank":1,"member":"y","value":30,"raw":30,"trend":"new"},
			{"rank":2,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"same"},
			{"rank":3,"member":"z","value":20,"raw":20,"prev_rank":1,"trend":"down"},
			{"rank":4,"member":"w","value":10,"raw":10,"trend":"new"}]`)},
		{"dims in any order, competition ranks", "/v1/boards/zone/top?dims=room:7,zone:3&rank=competition&trend=1", page(head("zone", zone, today, "competition", 4, true, false, ""), `[
			{"rank":1,"member":"y","value":30,"raw":30,"trend":"new"},
			{"rank":1,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"up"},
			{"rank":3,"member":"z","value":20,"raw":20,"prev_rank":1,"trend":"down"},
			{"rank":4,"member":"w","value":10,"raw":10,"trend":"new"}]`)},
		{"dims in two parameters, dense ranks", "/v1/boards/zone/top?dims=room:7&dims=zone:3&rank=dense&trend=1", page(head("zone", zone, today, "dense", 4, true, false, ""), `[
			{"rank":1,"member":"y","value":30,"raw":30,"trend":"new"},
			{"rank":1,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"up"},
			{"rank":2,"member":"z","value":20,"raw":20,"prev_rank":1,"trend":"down"},
			{"rank":3,"member":"w","value":10,"raw":10,"trend":"new"}]`)},
		{"dims value with ':' ',' ' ' '/' and UTF-8", "/v1/boards/zone/top?dims=zone:3,room:a:b%2Cc+d%2F%C3%A9",
			page(head("zone", `{"zone":"3","room":"a:b,c d/é"}`, today, "row", 1, true, false, ""), `[{"rank":1,"member":"q/1","value":5,"raw":5}]`)},
		{"known dims, empty period", "/v1/boards/zone/top?dims=zone:3,room:a:b%2Cc+d%2F%C3%A9&period=previous",
			page(head("zone", `{"zone":"3","room":"a:b,c d/é"}`, yesterday, "row", 0, true, false, ""), `[]`)},
		{"total board: trend=1 adds nothing", "/v1/boards/tot/top?trend=1&period=all", page(head("tot", "{}", allTime, "row", 2, true, false, ""), `[
			{"rank":1,"member":"m1","value":7,"raw":7},{"rank":2,"member":"m2","value":3,"raw":3}]`)},
		{"multi-factor: factors and tie times from the epoch", "/v1/boards/kd/top", page(head("kd", "{}", allTime, "row", 3, true, false, ""), `[
			{"rank":1,"member":"p3","value":851958,"raw":851958,"tie_time":"2026-11-21T11:15:00Z","factors":{"kills":12,"deaths":9}},
			{"rank":2,"member":"p1","value":720893,"raw":720893,"tie_time":"2026-11-21T10:00:00Z","factors":{"kills":10,"deaths":2}},
			{"rank":3,"member":"p2","value":720890,"raw":720890,"tie_time":"2026-11-21T09:00:00Z","factors":{"kills":10,"deaths":5}}]`)},
		{"rolling: tie times from the window start", "/v1/boards/r3/top?trend=1", page(head("r3", "{}", today, "row", 2, true, false, ""), `[
			{"rank":1,"member":"u1","value":6,"raw":6,"tie_time":"2026-11-20T01:00:00Z","prev_rank":1,"trend":"same"},
			{"rank":2,"member":"u2","value":5,"raw":5,"tie_time":"2026-11-21T07:30:15Z","trend":"new"}]`)},
		{"rolling: previous window", "/v1/boards/r3/top?period=previous", page(head("r3", "{}", yesterday, "row", 1, true, false, ""), `[
			{"rank":1,"member":"u1","value":6,"raw":6,"tie_time":"2026-11-20T01:00:00Z"}]`)},
		{"keep_top: trimmed set", "/v1/boards/kt/top?limit=1000", page(head("kt", "{}", allTime, "row", 3, false, false, ""), `[
			{"rank":1,"member":"k1","value":3,"raw":3},{"rank":2,"member":"k2","value":2,"raw":2}]`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := get(t, srv.URL+tt.path)
			if status != 200 {
				t.Fatalf("status %d: %v", status, body)
			}
			sameJSON(t, body, tt.want)
		})
	}
}

func TestMember(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	const zone = `"board":"zone","dims":{"zone":"3","room":"7"},"period":` + today
	tests := []struct {
		name, path, want string
	}{
		{"first: no member above", "/v1/boards/day/members/a", `{"board":"day","dims":{},"period":` + today + `,"rank_mode":"row",
			"rank":1,"member":"a","value":12.5,"raw":1250,"tie_time":"2026-11-21T10:00:00Z","prev_rank":2,"trend":"up",
			"rank_approx":false,"gap":0,"gap_raw":0,"count":5,"percentile":100}`},
		{"new member", "/v1/boards/day/members/b", `{"board":"day","dims":{},"period":` + today + `,"rank_mode":"row",
			"rank":2,"member":"b","value":10,"raw":1000,"tie_time":"2026-11-21T09:00:00Z","trend":"new",
			"rank_approx":false,"above":"a","gap":2.5,"gap_raw":250,"count":5,"percentile":80}`},
		{"row: the row above has an equal value", "/v1/boards/day/members/c?rank=row", `{"board":"day","dims":{},"period":` + today + `,"rank_mode":"row",
			"rank":3,"member":"c","value":10,"raw":1000,"tie_time":"2026-11-21T11:00:00Z","prev_rank":1,"trend":"down",
			"rank_approx":false,"above":"b","gap":0,"gap_raw":0,"count":5,"percentile":80}`},
		{"competition: tie shares the rank, above is strictly better", "/v1/boards/day/members/c?rank=competition", `{"board":"day","dims":{},"period":` + today + `,"rank_mode":"competition",
			"rank":2,"member":"c","value":10,"raw":1000,"tie_time":"2026-11-21T11:00:00Z","prev_rank":1,"trend":"down",
			"rank_approx":false,"above":"a","gap":2.5,"gap_raw":250,"count":5,"percentile":80}`},
		{"dense after a tie", "/v1/boards/day/members/d?rank=dense", `{"board":"day","dims":{},"period":` + today + `,"rank_mode":"dense",
			"rank":3,"member":"d","value":5,"raw":500,"tie_time":"2026-11-21T08:00:00Z","prev_rank":3,"trend":"same",
			"rank_approx":false,"above":"c","gap":5,"gap_raw":500,"count":5,"percentile":40}`},
		{"competition after a tie", "/v1/boards/day/members/d?rank=competition", `{"board":"day","dims":{},"period":` + today + `,"rank_mode":"competition",
			"rank":4,"member":"d","value":5,"raw":500,"tie_time":"2026-11-21T08:00:00Z","prev_rank":3,"trend":"down",
			"rank_approx":false,"above":"c","gap":5,"gap_raw":500,"count":5,"percentile":40}`},
		{"previous period, whose previous is empty", "/v1/boards/day/members/a?period=previous", `{"board":"day","dims":{},"period":` + yesterday + `,"rank_mode":"row",
			"rank":2,"member":"a","value":8,"raw":800,"tie_time":"2026-11-20T09:00:00Z","trend":"new",
			"rank_approx":false,"above":"c","gap":1,"gap_raw":100,"count":3,"percentile":66.66}`},
		{"dims: tie at the top in competition", "/v1/boards/zone/members/x?dims=zone:3,room:7&rank=competition", `{` + zone + `,"rank_mode":"competition",
			"rank":1,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"up","rank_approx":false,"gap":0,"gap_raw":0,"count":4,"percentile":100}`},
		{"dims: tie at the top in row", "/v1/boards/zone/members/x?dims=zone:3,room:7", `{` + zone + `,"rank_mode":"row",
			"rank":2,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"same","rank_approx":false,"above":"y","gap":0,"gap_raw":0,"count":4,"percentile":100}`},
		{"dims: dense", "/v1/boards/zone/members/z?dims=zone:3,room:7&rank=dense", `{` + zone + `,"rank_mode":"dense",
			"rank":2,"member":"z","value":20,"raw":20,"prev_rank":1,"trend":"down","rank_approx":false,"above":"x","gap":10,"gap_raw":10,"count":4,"percentile":50}`},
		{"escaped member and dims", "/v1/boards/zone/members/q%2F1?dims=zone:3,room:a%3Ab%2Cc%20d%2F%C3%A9", `{"board":"zone","dims":{"zone":"3","room":"a:b,c d/é"},
			"period":` + today + `,"rank_mode":"row","rank":1,"member":"q/1","value":5,"raw":5,"trend":"new","rank_approx":false,"gap":0,"gap_raw":0,"count":1,"percentile":100}`},
		{"total board: no trend", "/v1/boards/tot/members/m2", `{"board":"tot","dims":{},"period":` + allTime + `,"rank_mode":"row",
			"rank":2,"member":"m2","value":3,"raw":3,"rank_approx":false,"above":"m1","gap":4,"gap_raw":4,"count":2,"percentile":50}`},
		{"multi-factor", "/v1/boards/kd/members/p1", `{"board":"kd","dims":{},"period":` + allTime + `,"rank_mode":"row",
			"rank":2,"member":"p1","value":720893,"raw":720893,"tie_time":"2026-11-21T10:00:00Z","factors":{"kills":10,"deaths":2},
			"rank_approx":false,"above":"p3","gap":131065,"gap_raw":131065,"count":3,"percentile":66.66}`},
		{"rolling", "/v1/boards/r3/members/u2", `{"board":"r3","dims":{},"period":` + today + `,"rank_mode":"row",
			"rank":2,"member":"u2","value":5,"raw":5,"tie_time":"2026-11-21T07:30:15Z","trend":"new",
			"rank_approx":false,"above":"u1","gap":1,"gap_raw":1,"count":2,"percentile":50}`},
		{"keep_top: outside the set, approximate rank", "/v1/boards/kt/members/k3", `{"board":"kt","dims":{},"period":` + allTime + `,"rank_mode":"row",
			"rank":3,"member":"k3","value":1,"raw":1,"rank_approx":true,"above":"k2","gap":1,"gap_raw":1,"count":3,"percentile":33.33}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := get(t, srv.URL+tt.path)
			if status != 200 {
				t.Fatalf("status %d: %v", status, body)
			}
			sameJSON(t, body, tt.want)
		})
	}
}

func TestAround(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	many := func(member, mode string, count int, approx bool) string {
		return head("line", `{"g":"many"}`, allTime, mode, count, true, approx, member)
	}
	row := func(rank int, member string, value int) string {
		return `{"rank":` + itoa(rank) + `,"member":"` + member + `","value":` + itoa(value) + `,"raw":` + itoa(value) + `}`
	}
	six := []string{row(1, "la", 60), row(2, "lb", 50), row(3, "lc", 40), row(4, "ld", 30), row(5, "le", 20), row(6, "lf", 10)}
	list := func(rows ...string) string { return "[" + strings.Join(rows, ",") + "]" }
	tests := []struct {
		name, path, want string
	}{
		{"first member: fills below", "/v1/boards/line/members/la/around?dims=g:many&n=2", page(many("la", "row", 6, false), list(six[:5]...))},
		{"last member: fills above", "/v1/boards/line/members/lf/around?dims=g:many&n=2", page(many("lf", "row", 6, false), list(six[1:]...))},
		{"middle", "/v1/boards/line/members/lc/around?dims=g:many&n=1", page(many("lc", "row", 6, false), list(six[1:4]...))},
		{"n=0", "/v1/boards/line/members/ld/around?dims=g:many&n=0", page(many("ld", "row", 6, false), list(six[3]))},
		{"default n=5 covers the board", "/v1/boards/line/members/lc/around?dims=g:many", page(many("lc", "row", 6, false), list(six...))},
		{"n larger than the board", "/v1/boards/line/members/le/around?dims=g:many&n=500", page(many("le", "row", 6, false), list(six...))},
		{"single member", "/v1/boards/line/members/only/around?dims=g:one&n=5",
			page(head("line", `{"g":"one"}`, allTime, "row", 1, true, false, "only"), list(row(1, "only", 1)))},
		{"ties in competition, with trend", "/v1/boards/zone/members/x/around?dims=zone:3,room:7&n=1&rank=competition&trend=1",
			page(head("zone", `{"zone":"3","room":"7"}`, today, "competition", 4, true, false, "x"), `[
			{"rank":1,"member":"y","value":30,"raw":30,"trend":"new"},
			{"rank":1,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"up"},
			{"rank":3,"member":"z","value":20,"raw":20,"prev_rank":1,"trend":"down"}]`)},
		{"ties in dense, last member", "/v1/boards/zone/members/w/around?dims=zone:3,room:7&n=1&rank=dense",
			page(head("zone", `{"zone":"3","room":"7"}`, today, "dense", 4, true, false, "w"), `[
			{"rank":1,"member":"x","value":30,"raw":30},
			{"rank":2,"member":"z","value":20,"raw":20},
			{"rank":3,"member":"w","value":10,"raw":10}]`)},
		{"tie times", "/v1/boards/day/members/e/around?n=1&period=current", page(head("day", "{}", today, "row", 5, true, false, "e"), `[
			{"rank":3,"member":"c","value":10,"raw":1000,"tie_time":"2026-11-21T11:00:00Z"},
			{"rank":4,"member":"d","value":5,"raw":500,"tie_time":"2026-11-21T08:00:00Z"},
			{"rank":5,"member":"e","value":0.05,"raw":5,"tie_time":"2026-11-21T08:00:00Z"}]`)},
		{"keep_top: member outside the set comes last", "/v1/boards/kt/members/k3/around?n=1",
			page(head("kt", "{}", allTime, "row", 3, false, true, "k3"), list(row(1, "k1", 3), row(2, "k2", 2), row(3, "k3", 1)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := get(t, srv.URL+tt.path)
			if status != 200 {
				t.Fatalf("status %d: %v", status, body)
			}
			sameJSON(t, body, tt.want)
		})
	}
}

// TestFinal: a period is reported final once the partitions' stream times
// have passed its end plus the grace.
func TestFinal(t *testing.T) {
	srv, st := fixture(t)
	if _, err := st.Apply(t.Context(), nil, store.Mark{Topic: "gift", Partition: 0, Offset: 10, Time: at(21, 1, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	_, raw, _ := get(t, srv.URL+"/v1/boards/day/top?period=previous")
	body, _ := raw.(map[string]any)
	p, _ := body["period"].(map[string]any)
	if p["final"] != true {
		t.Fatalf("previous period (ended 00:00, grace 1h, stream at 01:00): final = %v, want true", p["final"])
	}
	_, raw, _ = get(t, srv.URL+"/v1/boards/day/top")
	body, _ = raw.(map[string]any)
	p, _ = body["period"].(map[string]any)
	if p["final"] != false {
		t.Fatalf("current period: final = %v, want false", p["final"])
	}
}
