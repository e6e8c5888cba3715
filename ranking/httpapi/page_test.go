package httpapi_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rankd/rankd/ranking/httpapi"
)

// getPage fetches a page URL and returns its status, headers and body.
func getPage(t *testing.T, url string) (int, http.Header, string) {
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
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestPage: the page is rendered by the server with the board in it (the
// first paint needs no JS), for every kind of board, period and dims, and
// with the API's error messages.
func TestPage(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	hidden := func(id string) *regexp.Regexp { return regexp.MustCompile(`id="` + id + `"[^>]* hidden[ >]`) }
	tests := []struct {
		name    string
		path    string
		status  int
		rows    []string
		want    []string
		notWant []string
		hidden  []string // ids of controls hidden
		shown   []string
	}{
		{name: "default board", path: "/", status: 200, rows: []string{"a", "b", "c", "d", "e"},
			want: []string{`<option value="day" data-dims="" title="Gifts today" selected>day</option>`, `<h2 data-testid="title">Gifts today</h2>`}},
		{name: "day board", path: "/?board=day", status: 200, rows: []string{"a", "b", "c", "d", "e"},
			want: []string{
				`<span class="when" data-testid="period">21 Nov 2026</span> · 5 members · times in <span data-testid="zone">UTC</span> · updated `,
				`<th class="trend" scope="col" data-testid="trend-header">Trend</th>`,
				`<th class="value" scope="col" data-testid="value-header">Value</th>`,
				`<td class="trend up" data-testid="trend" title="previous rank 2">▲</td>`,
				`<td class="trend new" data-testid="trend" title="not on the board in the previous period">new</td>`,
				`data-testid="value">12.5<`, `data-testid="value">0.05<`,
				`data-testid="details">reached at 10:00:00<`,
				`<option value="current" selected>21 Nov 2026</option>`, `<option value="previous">20 Nov 2026</option>`,
				"setTimeout(refresh",
			},
			hidden: []string{"dimswrap", "pickwrap"}},
		{name: "previous period", path: "/?board=day&period=previous", status: 200, rows: []string{"c", "a", "d"},
			want: []string{`data-testid="period">20 Nov 2026</span>`, `<option value="previous" selected>20 Nov 2026</option>`}},
		{name: "a period id", path: "/?board=day&period=20261120", status: 200, rows: []string{"c", "a", "d"},
			want: []string{`data-testid="period">20 Nov 2026</span>`, `<option value="20261120" selected>20 Nov 2026</option>`}},
		{name: "weekly board", path: "/?board=wk", status: 200,
			want: []string{`data-testid="period">week of 15 Nov 2026</span> · 0 members`, `No members in this period yet.`}},
		{name: "rolling board", path: "/?board=r3", status: 200, rows: []string{"u1", "u2"},
			want: []string{`data-testid="period">last 3 days</span>`, `<option value="previous">3 days to 20 Nov 2026</option>`,
				`data-testid="details">reached at 20 Nov 01:00:00<`}},
		{name: "total board: no trend, no details", path: "/?board=tot", status: 200, rows: []string{"m1", "m2"},
			want:    []string{`data-testid="period">all time</span>`, `<option value="current" selected>all time</option>`},
			notWant: []string{`data-testid="trend"`, `trend-header`, `class="details"`, `value="previous"`}},
		{name: "sort factors", path: "/?board=kd", status: 200, rows: []string{"p3", "p1", "p2"},
			want: []string{`data-testid="details">kills 12 · deaths 9 · reached at 21 Nov 2026 11:15<`}},
		{name: "dims board without dims", path: "/?board=zone", status: 200,
			want:    []string{`data-testid="status">Pick a value of zone, room to see this board.<`, `placeholder="zone:…,room:…"`},
			notWant: []string{`<table>`},
			hidden:  []string{"pickwrap"}, shown: []string{"dimswrap"}},
		{name: "dims in the URL", path: "/?board=zone&dims=room:7,zone:3", status: 200, rows: []string{"y", "x", "z", "w"},
			want: []string{`value="zone:3,room:7"`}},
		{name: "dims as the API takes them", path: "/?board=zone&dims=zone:3,room:a:b%2Cc%20d%2F%C3%A9", status: 200, rows: []string{"q/1"},
			want: []string{`value="zone:3,room:a:b%2Cc d/é"`}},
		{name: "dims as a form sends the Dims box", path: "/?board=zone&dims=zone%3A3%2Croom%3Aa%3Ab%252Cc+d%2F%C3%A9", status: 200, rows: []string{"q/1"},
			want: []string{`value="zone:3,room:a:b%2Cc d/é"`}},
		{name: "dims missing one", path: "/?board=zone&dims=zone:3", status: 400,
			want: []string{`role="alert">dims: board &#34;zone&#34; needs a value for &#34;room&#34; (dims=zone:...,room:...)<`, `value="zone:3"`}},
		{name: "unknown board", path: "/?board=nope", status: 200, rows: []string{"a", "b", "c", "d", "e"},
			want: []string{`There is no board &#34;nope&#34;: showing day.`}},
		{name: "bad period", path: "/?board=day&period=bogus", status: 400,
			want: []string{`role="alert">period &#34;bogus&#34;: want current, previous or a period id of board &#34;day&#34; (e.g. 20261121)<`}},
		{name: "unknown dims", path: "/?board=zone&dims=zone:3,room:9", status: 404,
			want: []string{`role="alert">board &#34;zone&#34; has no data for dims zone:3,room:9; its dims values are listed at /v1/boards/zone/dims<`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := getPage(t, srv.URL+tt.path)
			if status != tt.status || h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("Cache-Control") != "no-store" ||
				!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
				t.Fatalf("GET %s: %d %v", tt.path, status, h)
			}
			if got := rowMembers(body); !slices.Equal(got, tt.rows) {
				t.Errorf("rows %q, want %q", got, tt.rows)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("no %s in the page", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(body, w) {
					t.Errorf("%s in the page", w)
				}
			}
			for _, id := range tt.hidden {
				if !hidden(id).MatchString(body) {
					t.Errorf("#%s is not hidden", id)
				}
			}
			for _, id := range tt.shown {
				if hidden(id).MatchString(body) {
					t.Errorf("#%s is hidden", id)
				}
			}
			if t.Failed() {
				t.Logf("page:\n%s", body)
			}
		})
	}

	t.Run("part=view: the board and the period list only", func(t *testing.T) {
		status, _, body := getPage(t, srv.URL+"/?board=day&period=previous&part=view")
		if status != 200 || !strings.HasPrefix(body, `<main id="view"`) || strings.Contains(body, "<html") || strings.Contains(body, "<script") ||
			!strings.Contains(body, `<select id="period" name="period" data-testid="period-select">`) {
			t.Errorf("part=view: %d\n%s", status, body)
		}
		if got := rowMembers(body); !slices.Equal(got, []string{"c", "a", "d"}) {
			t.Errorf("rows %q", got)
		}
	})

	t.Run("HEAD", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, srv.URL+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("HEAD /: %d", resp.StatusCode)
		}
	})
}

// TestPageCache: the page reads the board through the response cache, as
// the same /top request of the API does.
func TestPageCache(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	srv, _ := fixture(t, httpapi.WithCache(time.Minute, 1<<20), httpapi.WithRegisterer(reg))
	getPage(t, srv.URL+"/?board=day")
	getPage(t, srv.URL+"/?board=day&part=view")
	get(t, srv.URL+"/v1/boards/day/top?limit=20&trend=1&period=current&dims=")
	want := `# HELP rankd_http_cache_requests_total Board reads per cache result: hit (served from memory), stale (served from memory, expired, while another request reads it again), miss (read Redis), coalesced (waited for another request's read).
# TYPE rankd_http_cache_requests_total counter
rankd_http_cache_requests_total{result="coalesced"} 0
rankd_http_cache_requests_total{result="hit"} 2
rankd_http_cache_requests_total{result="miss"} 1
rankd_http_cache_requests_total{result="stale"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rankd_http_cache_requests_total"); err != nil {
		t.Error(err)
	}
}
