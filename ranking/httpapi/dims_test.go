package httpapi_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// TestDims: /dims lists the dims values with members in the period, with
// their counts, paged by limit and cursor.
func TestDims(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	const (
		room7 = `{"dims":{"zone":"3","room":"7"},"count":`
		odd   = `{"dims":{"zone":"3","room":"a:b,c d/é"},"count":1}`
	)
	tests := []struct {
		name, path, want string
	}{
		{"one page", "/v1/boards/zone/dims", `{"board":"zone","period":` + today + `,"dims":[` + room7 + `4},` + odd + `]}`},
		{"limit 1: first page", "/v1/boards/zone/dims?limit=1&period=current",
			`{"board":"zone","period":` + today + `,"dims":[` + room7 + `4}],"next_cursor":"MCB6b25lfDMsNw"}`},
		{"limit 1: second and last page", "/v1/boards/zone/dims?limit=1&cursor=MCB6b25lfDMsNw",
			`{"board":"zone","period":` + today + `,"dims":[` + odd + `]}`},
		{"previous period: values without members there are left out", "/v1/boards/zone/dims?period=previous",
			`{"board":"zone","period":` + yesterday + `,"dims":[` + room7 + `2}]}`},
		{"previous period, limit 1: a page may be empty", "/v1/boards/zone/dims?period=previous&limit=1&cursor=MCB6b25lfDMsNw",
			`{"board":"zone","period":` + yesterday + `,"dims":[]}`},
		{"period id with no data", "/v1/boards/zone/dims?period=20261101",
			`{"board":"zone","period":{"id":"20261101","start":"2026-11-01T00:00:00Z","end":"2026-11-02T00:00:00Z","final":false},"dims":[]}`},
		{"total board", "/v1/boards/line/dims?limit=1", `{"board":"line","period":` + allTime + `,"dims":[{"dims":{"g":"many"},"count":6}],"next_cursor":"MCBsaW5lfG1hbnk"}`},
		{"total board, page 2", "/v1/boards/line/dims?limit=1&cursor=MCBsaW5lfG1hbnk", `{"board":"line","period":` + allTime + `,"dims":[{"dims":{"g":"one"},"count":1}]}`},
		{"board without dims", "/v1/boards/day/dims", `{"board":"day","period":` + today + `,"dims":[{"dims":{},"count":5}]}`},
		{"keep_top: count of the kept scores", "/v1/boards/kt/dims", `{"board":"kt","period":` + allTime + `,"dims":[{"dims":{},"count":3}]}`},
		{"no data at all", "/v1/boards/wk/dims", `{"board":"wk","period":{"id":"2026W46","start":"2026-11-15T00:00:00Z","end":"2026-11-22T00:00:00Z","final":false},"dims":[]}`},
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

// TestDimsPagingLarge: a registry of 700 tags (a hash table, scanned in
// several batches) is listed whole by following next_cursor with a small
// limit, each page within its limit, and every value once.
func TestDimsPagingLarge(t *testing.T) {
	t.Parallel()
	srv, st := fixture(t)
	var ups []ranking.Update
	want := []string{"many", "one"}
	for i := range 700 {
		g := fmt.Sprintf("v%03d", i)
		want = append(want, g)
		ups = append(ups, ranking.Update{Board: "line", Dims: []string{g}, Member: "m", Value: int64(i + 1), Time: now, MsgID: "big" + g})
	}
	if _, err := st.Apply(t.Context(), store.Group(ups)); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("listing does not end")
		}
		status, raw, _ := get(t, srv.URL+"/v1/boards/line/dims?limit=7&cursor="+url.QueryEscape(cursor))
		if status != 200 {
			t.Fatalf("status %d: %v", status, raw)
		}
		body := raw.(map[string]any)
		dims := body["dims"].([]any)
		if len(dims) > 7 {
			t.Fatalf("page of %d values, limit 7", len(dims))
		}
		for _, d := range dims {
			d := d.(map[string]any)
			g := d["dims"].(map[string]any)["g"].(string)
			got = append(got, g)
			if wantCount := map[string]string{"many": "6"}[g]; wantCount == "" && d["count"].(interface{ String() string }).String() != "1" ||
				wantCount != "" && d["count"].(interface{ String() string }).String() != wantCount {
				t.Errorf("%s: count %v", g, d["count"])
			}
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d values, want %d once each", len(got), len(want))
	}
}

// TestTopPercent: top?percent=P lists the first ceil(count*P/100) members.
func TestTopPercent(t *testing.T) {
	t.Parallel()
	srv, st := fixture(t)
	a := `{"rank":1,"member":"a","value":12.5,"raw":1250,"tie_time":"2026-11-21T10:00:00Z"}`
	b := `{"rank":2,"member":"b","value":10,"raw":1000,"tie_time":"2026-11-21T09:00:00Z"}`
	c := `{"rank":3,"member":"c","value":10,"raw":1000,"tie_time":"2026-11-21T11:00:00Z"}`
	d := `{"rank":4,"member":"d","value":5,"raw":500,"tie_time":"2026-11-21T08:00:00Z"}`
	e := `{"rank":5,"member":"e","value":0.05,"raw":5,"tie_time":"2026-11-21T08:00:00Z"}`
	dayHead := func(percent string) string {
		return `"board":"day","dims":{},"period":` + today + `,"rank_mode":"row","percent":` + percent + `,"count":5,"complete":true,"rank_approx":false`
	}
	tests := []struct {
		name, path, want string
	}{
		{"20% of 5 is 1", "/v1/boards/day/top?percent=20", page(dayHead("20"), "["+a+"]")},
		{"0.01% of 5 rounds up to 1", "/v1/boards/day/top?percent=0.01", page(dayHead("0.01"), "["+a+"]")},
		{"40% of 5 is 2", "/v1/boards/day/top?percent=40", page(dayHead("40"), "["+a+","+b+"]")},
		{"40.01% of 5 rounds up to 3", "/v1/boards/day/top?percent=40.01", page(dayHead("40.01"), "["+a+","+b+","+c+"]")},
		{"50% of 5 is 3", "/v1/boards/day/top?percent=50.0", page(dayHead("50"), "["+a+","+b+","+c+"]")},
		{"100%", "/v1/boards/day/top?percent=100", page(dayHead("100"), "["+a+","+b+","+c+","+d+","+e+"]")},
		{"competition ranks", "/v1/boards/day/top?percent=60&rank=competition",
			`{"board":"day","dims":{},"period":` + today + `,"rank_mode":"competition","percent":60,"count":5,"complete":true,"rank_approx":false,"entries":[` +
				a + `,` + b + `,` + `{"rank":2,"member":"c","value":10,"raw":1000,"tie_time":"2026-11-21T11:00:00Z"}]}`},
		{"dims", "/v1/boards/zone/top?dims=zone:3,room:7&percent=50&trend=1",
			`{"board":"zone","dims":{"zone":"3","room":"7"},"period":` + today + `,"rank_mode":"row","percent":50,"count":4,"complete":true,"rank_approx":false,"entries":[
			{"rank":1,"member":"y","value":30,"raw":30,"trend":"new"},{"rank":2,"member":"x","value":30,"raw":30,"prev_rank":2,"trend":"same"}]}`},
		{"known dims, empty period", "/v1/boards/zone/top?dims=zone:3,room:7&percent=50&period=20261101",
			`{"board":"zone","dims":{"zone":"3","room":"7"},"period":{"id":"20261101","start":"2026-11-01T00:00:00Z","end":"2026-11-02T00:00:00Z","final":false},` +
				`"rank_mode":"row","percent":50,"count":0,"complete":true,"rank_approx":false,"entries":[]}`},
		{"keep_top: 34% of the 3 kept scores is 2", "/v1/boards/kt/top?percent=34",
			`{"board":"kt","dims":{},"period":` + allTime + `,"rank_mode":"row","percent":34,"count":3,"complete":false,"rank_approx":false,"entries":[
			{"rank":1,"member":"k1","value":3,"raw":3},{"rank":2,"member":"k2","value":2,"raw":2}]}`},
		{"keep_top: 100% asks 3, the set holds 2", "/v1/boards/kt/top?percent=100",
			`{"board":"kt","dims":{},"period":` + allTime + `,"rank_mode":"row","percent":100,"count":3,"complete":false,"rank_approx":false,"entries":[
			{"rank":1,"member":"k1","value":3,"raw":3},{"rank":2,"member":"k2","value":2,"raw":2}]}`},
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

	// wk: 1001 members; 99.9% is 1000 rows (a full page), 99.91% 1001.
	var ups []ranking.Update
	for i := range 1001 {
		ups = append(ups, ranking.Update{Board: "wk", Member: fmt.Sprintf("w%04d", i), Value: int64(i + 1), Time: now, MsgID: fmt.Sprint("wk", i)})
	}
	if _, err := st.Apply(t.Context(), store.Group(ups)); err != nil {
		t.Fatal(err)
	}
	status, raw, _ := get(t, srv.URL+"/v1/boards/wk/top?percent=99.9")
	if status != 200 {
		t.Fatalf("percent=99.9 of 1001: status %d: %v", status, raw)
	}
	if n := len(raw.(map[string]any)["entries"].([]any)); n != 1000 {
		t.Fatalf("percent=99.9 of 1001: %d entries, want 1000", n)
	}
	for _, p := range []string{"99.91", "100"} {
		status, raw, _ = get(t, srv.URL+"/v1/boards/wk/top?percent="+p)
		m, _ := raw.(map[string]any)
		if status != 400 || m["code"] != "bad_request" {
			t.Fatalf("percent=%s of 1001: status %d %v, want 400 bad_request", p, status, raw)
		}
		if msg, want := m["error"], "bad limit: the top "+p+"% of 1001 members is 1001 members, more than a page holds (1000); ask for a smaller percent"; msg != want {
			t.Errorf("message %q, want %q", msg, want)
		}
	}
}

// TestPercentileTies: equal values share their percentile whatever the
// rank mode; a keep_top member outside the set gets an upper bound.
func TestPercentileTies(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	for _, tt := range []struct{ path, want string }{
		{"/v1/boards/zone/members/y?dims=zone:3,room:7", "100"},
		{"/v1/boards/zone/members/x?dims=zone:3,room:7&rank=competition", "100"},
		{"/v1/boards/zone/members/w?dims=zone:3,room:7&rank=dense", "25"},
		{"/v1/boards/day/members/e", "20"},
		{"/v1/boards/day/members/c?rank=row", "80"},
		{"/v1/boards/kt/members/k3?rank=competition", "33.33"},
		{"/v1/boards/line/members/lb?dims=g:many", "83.33"},
	} {
		status, raw, _ := get(t, srv.URL+tt.path)
		if status != 200 {
			t.Fatalf("%s: status %d %v", tt.path, status, raw)
		}
		if got := fmt.Sprint(raw.(map[string]any)["percentile"]); got != tt.want {
			t.Errorf("%s: percentile %s, want %s", tt.path, got, tt.want)
		}
	}
}
