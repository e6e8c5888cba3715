package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// chromiumPath is Debian's Chromium (package chromium).
const chromiumPath = "/usr/bin/chromium"

// screenshotsEnv names the directory the page test writes its screenshots
// to (page-1280x800.png, page-390x844.png), when set.
const screenshotsEnv = "RANKD_SCREENSHOTS"

// browser starts a headless Chromium for t, driven over the DevTools
// protocol (chromedp), and returns its context: each chromedp.NewContext of
// it is a tab. The browser runs with a fresh profile directory (chromedp's
// own, removed with every process of it when the browser stops) and no
// network of its own (no background fetches, sync, updates or QUIC). It
// skips t when Chromium is not installed, or fails it under CI=true.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Unavailable(t, "headless Chromium not found at %s: install the Debian package chromium (apt-get install -y chromium)", chromiumPath)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-crash-reporter", true),
		chromedp.Flag("disable-extensions", true),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser, which lives as long as the context
	// of that run: it takes no timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return ctx
}

// tab opens a tab of the browser with a viewport of w x h CSS pixels (a
// phone's when mobile: touch, device scale 2) and JS on or off; it closes
// when t ends. Every action on it has 60 s.
func tab(t *testing.T, b context.Context, w, h int64, mobile, js bool) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	opts := []chromedp.EmulateViewportOption{}
	if mobile {
		opts = append(opts, chromedp.EmulateScale(2), chromedp.EmulateMobile)
	}
	steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(w, h, opts...)}
	if !js {
		steps = append(steps, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}))
	}
	if err := chromedp.Do(ctx, steps...); err != nil { // opens the tab: no timeout either
		t.Fatalf("opening a tab: %v", err)
	}
	tctx, stop := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(stop)
	return tctx
}

// do runs steps in the tab, failing t on an error.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates a JS expression in the tab.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JS predicate in the tab for up to 10 s.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		t.Fatalf("waiting for %s (%s): %v; DOM:\n%s", what, expr, err, html)
	}
}

// dom is the tab's DOM as HTML, read over the DevTools protocol (it works
// with JS off).
func dom(t *testing.T, ctx context.Context) string {
	t.Helper()
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	return html
}

var (
	rowRe   = regexp.MustCompile(`<tr[^>]*data-testid="row"[^>]*>`)
	memRe   = regexp.MustCompile(`data-member="([^"]*)"`)
	trendRe = regexp.MustCompile(`data-testid="trend"[^>]*>([^<]*)<`)
)

// rowMembers lists the members of the rows in an HTML text.
func rowMembers(html string) []string {
	var members []string
	for _, r := range rowRe.FindAllString(html, -1) {
		if m := memRe.FindStringSubmatch(r); m != nil {
			members = append(members, m[1])
		}
	}
	return members
}

// TestPageInBrowser loads the page of the UTC test boards in headless
// Chromium: the rows, trend arrows and decoded values of the day board,
// a dims board read with dims in the URL, and the dims picker.
func TestPageInBrowser(t *testing.T) {
	t.Parallel()
	srv, _ := fixture(t)
	b := browser(t)

	t.Run("rows", func(t *testing.T) {
		ctx := tab(t, b, 1280, 800, false, true)
		do(t, ctx, chromedp.Navigate(srv.URL+"/?board=day"))
		html := dom(t, ctx)
		if got, want := rowMembers(html), []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
			t.Fatalf("rows %q, want members %q; DOM:\n%s", got, want, html)
		}
		var trends []string
		for _, m := range trendRe.FindAllStringSubmatch(html, -1) {
			trends = append(trends, m[1])
		}
		if want := []string{"▲", "new", "▼", "▼", "new"}; !slices.Equal(trends, want) {
			t.Errorf("trend cells %q, want %q", trends, want)
		}
		if !strings.Contains(html, `data-testid="value">12.5<`) {
			t.Errorf("no value cell 12.5 in DOM:\n%s", html)
		}
	})

	t.Run("dims in the URL", func(t *testing.T) {
		ctx := tab(t, b, 1280, 800, false, true)
		do(t, ctx, chromedp.Navigate(srv.URL+"/?board=zone&dims=room:7,zone:3"))
		if got, want := rowMembers(dom(t, ctx)), []string{"y", "x", "z", "w"}; !slices.Equal(got, want) {
			t.Fatalf("rows %q, want members %q", got, want)
		}
	})

	// The page of a dims board without dims lists the values with members
	// (from /dims) in a picker; picking the value whose room is
	// "a:b,c d/é" as a user would (select + change event) shows its rows
	// and puts the dims in the URL.
	t.Run("dims picker", func(t *testing.T) {
		ctx := tab(t, b, 1280, 800, false, true)
		do(t, ctx, chromedp.Navigate(srv.URL+"/?board=zone"))
		if s := eval[string](t, ctx, `document.getElementById("status").textContent`); s != "Pick a value of zone, room to see this board." {
			t.Errorf("status %q before a pick", s)
		}
		waitFor(t, ctx, "the picker's values", `document.getElementById("dimspick").options.length >= 3`)
		opts := eval[[]string](t, ctx, `[...document.getElementById("dimspick").options].map((o) => o.textContent)`)
		for _, want := range []string{"zone 3 · room 7 (4)", "zone 3 · room a:b,c d/é (1)"} {
			if !slices.Contains(opts, want) {
				t.Errorf("picker options %q: no %q", opts, want)
			}
		}
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {
			const pick = document.getElementById("dimspick");
			pick.value = [...pick.options].find((o) => o.textContent.includes("a:b,c d/é")).value;
			pick.dispatchEvent(new Event("change"));
		})()`))
		waitFor(t, ctx, "the picked value's rows", `document.querySelector('tr[data-testid="row"]') !== null`)
		if got, want := rowMembers(dom(t, ctx)), []string{"q/1"}; !slices.Equal(got, want) {
			t.Errorf("rows %q after picking, want members %q", got, want)
		}
		if s, want := eval[string](t, ctx, `location.search`), "?board=zone&period=current&dims=zone:3,room:a%3Ab%2Cc%20d%2F%C3%A9"; s != want {
			t.Errorf("URL after picking %s, want %s", s, want)
		}
		// the URL shows the same again
		do(t, ctx, chromedp.Reload())
		if got, want := rowMembers(dom(t, ctx)), []string{"q/1"}; !slices.Equal(got, want) {
			t.Errorf("rows %q after a reload, want members %q", got, want)
		}
		if v := eval[string](t, ctx, `document.getElementById("dims").value`); v != "zone:3,room:a:b%2Cc d/é" {
			t.Errorf("Dims box %q after a reload", v)
		}
	})
}

// shanghaiNow is the clock of TestPageLayout's store: Thursday 26 Nov
// 2026 14:10 in Shanghai, the zone of the example config's boards.
var shanghaiNow = time.Date(2026, 11, 26, 6, 10, 0, 0, time.UTC)

// exampleFixture serves the example config's boards (Asia/Shanghai) from a
// store on the test Redis whose clock is shanghaiNow, with a few members;
// add applies more updates.
func exampleFixture(t *testing.T) (srv *httptest.Server, add func(ups ...ranking.Update)) {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(testenv.Redis(t).Client(t), cfg.Boards(), store.WithPrefix(testenv.Prefix(t)),
		store.WithClock(func() time.Time { return shanghaiNow }))
	if err != nil {
		t.Fatal(err)
	}
	id := 0
	add = func(ups ...ranking.Update) {
		t.Helper()
		for i := range ups {
			id++
			ups[i].MsgID = fmt.Sprint("page-", id)
		}
		res, err := st.Apply(t.Context(), store.Group(ups))
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range res.Status {
			if s != ranking.StatusApplied {
				t.Fatalf("update %d (%+v): %v", i, ups[i], s)
			}
		}
	}
	utc := func(day, h, m, s int) time.Time { return time.Date(2026, 11, day, h, m, s, 0, time.UTC) }
	up := func(board string, dims []string, member string, value int64, at time.Time) ranking.Update {
		return ranking.Update{Board: board, Dims: dims, Member: member, Value: value, Time: at}
	}
	north, south := []string{"north"}, []string{"south"}
	add(
		// the previous half hour, 13:30-14:00 in Shanghai
		up("anchor_hot_30m", nil, "a100002", 900000, utc(26, 5, 40, 0)),
		up("anchor_hot_30m", nil, "a100003", 500, utc(26, 5, 41, 0)),
		up("anchor_hot_30m", nil, "a100001", 10, utc(26, 5, 42, 0)),
		// the current one, 14:00-14:30: values of 1 to 7 digits
		up("anchor_hot_30m", nil, "a100001", 1250000, utc(26, 6, 1, 0)),
		up("anchor_hot_30m", nil, "a100002", 98765, utc(26, 6, 2, 30)),
		up("anchor_hot_30m", nil, "a100003", 5020, utc(26, 6, 3, 7)),
		up("anchor_hot_30m", nil, "a100004", 5020, utc(26, 6, 4, 0)),
		up("anchor_hot_30m", nil, "a100006", 300, utc(26, 6, 6, 0)),
		up("anchor_hot_30m", nil, "a100005", 7, utc(26, 6, 5, 0)),
		up("anchor_hot_zone_30m", north, "a100001", 1250000, utc(26, 6, 1, 0)),
		up("anchor_hot_zone_30m", north, "a100003", 5020, utc(26, 6, 3, 7)),
		up("anchor_hot_zone_30m", south, "a100002", 98765, utc(26, 6, 2, 30)),
		up("anchor_7d", nil, "a100001", 700, utc(21, 3, 0, 0)),
		up("anchor_7d", nil, "a100002", 650, utc(26, 6, 2, 30)),
		up("anchor_total", nil, "a100001", 1250010, utc(26, 6, 1, 0)),
	)
	srv = httptest.NewServer(httpapi.New(st))
	t.Cleanup(srv.Close)
	return srv, add
}

// alignJS measures, in CSS pixels, the right edge of the text of the Value
// header and of every value cell.
const alignJS = `(() => {
	const right = (el) => { const r = document.createRange(); r.selectNodeContents(el); return r.getBoundingClientRect().right; };
	return { header: right(document.querySelector("th.value")), cells: [...document.querySelectorAll("td.value")].map(right) };
})()`

type alignment struct {
	Header float64   `json:"header"`
	Cells  []float64 `json:"cells"`
}

// checkAlignment: the Value header's text ends where the values end
// (right-aligned numbers), within 2 px.
func checkAlignment(t *testing.T, ctx context.Context) {
	t.Helper()
	a := eval[alignment](t, ctx, alignJS)
	if len(a.Cells) == 0 {
		t.Fatal("no value cells")
	}
	for i, c := range a.Cells {
		if math.Abs(c-a.Header) > 2 {
			t.Errorf("value cell %d ends at x=%.1f, the Value header at x=%.1f: not aligned", i+1, c, a.Header)
		}
	}
}

// visible is a JS expression: whether the element with id takes room.
func visible(id string) string {
	return fmt.Sprintf(`(() => { const e = document.getElementById(%q); return !!e && e.getClientRects().length > 0; })()`, id)
}

// TestPageLayout checks the page as people see it, in headless Chromium at
// 1280x800 (desktop) and 390x844 (phone), on the example config's boards
// (Asia/Shanghai): the first paint holds the rows without JS; the Value
// header lines up with the values; the trend column has a header; times and
// periods are shown in Shanghai time with the zone named, periods by label
// with the raw id kept in the URL; the dims controls show for a board with
// dims only; the zone board's header holds on one line at 1280 px; JS
// refreshes the rows. Screenshots go to $RANKD_SCREENSHOTS when set.
func TestPageLayout(t *testing.T) {
	t.Parallel()
	srv, add := exampleFixture(t)
	b := browser(t)
	hot := srv.URL + "/?board=anchor_hot_30m"
	wantRows := []string{"a100001", "a100002", "a100003", "a100004", "a100006", "a100005"}

	t.Run("first paint without JS", func(t *testing.T) {
		ctx := tab(t, b, 1280, 800, false, false)
		do(t, ctx, chromedp.Navigate(hot))
		html := dom(t, ctx)
		if got := rowMembers(html); !slices.Equal(got, wantRows) {
			t.Fatalf("rows %q with JS off, want %q; DOM:\n%s", got, wantRows, html)
		}
		for _, want := range []string{
			`data-testid="value">1,250,000<`,
			`<span class="when" data-testid="period">26 Nov 2026 14:00–14:30</span>`,
			`<span data-testid="zone">Asia/Shanghai, UTC+8</span>`,
			`data-testid="details">reached at 14:01:00<`,
			`<th class="trend" scope="col" data-testid="trend-header">Trend</th>`,
		} {
			if !strings.Contains(html, want) {
				t.Errorf("no %s in the first paint; DOM:\n%s", want, html)
			}
		}
		// the zone board: its picker is filled by JS, so it stays hidden
		do(t, ctx, chromedp.Navigate(srv.URL+"/?board=anchor_hot_zone_30m&dims=zone:north"))
		html = dom(t, ctx)
		if got, want := rowMembers(html), []string{"a100001", "a100003"}; !slices.Equal(got, want) {
			t.Errorf("zone board rows %q with JS off, want %q", got, want)
		}
		if !regexp.MustCompile(`<label id="pickwrap"[^>]* hidden`).MatchString(html) {
			t.Errorf("the dims picker shows with JS off (empty); DOM:\n%s", html)
		}
	})

	for _, size := range []struct {
		name   string
		w, h   int64
		mobile bool
	}{
		{"1280x800", 1280, 800, false},
		{"390x844", 390, 844, true},
	} {
		t.Run(size.name, func(t *testing.T) {
			ctx := tab(t, b, size.w, size.h, size.mobile, true)
			do(t, ctx, chromedp.Navigate(hot))
			checkAlignment(t, ctx)
			if th := eval[string](t, ctx, `document.querySelector("th.trend").textContent`); th != "Trend" {
				t.Errorf("trend column header %q, want Trend", th)
			}
			status := eval[string](t, ctx, `document.getElementById("status").textContent`)
			if !strings.Contains(status, "26 Nov 2026 14:00–14:30") || !strings.Contains(status, "times in Asia/Shanghai, UTC+8") {
				t.Errorf("status %q: want the period in Shanghai time and the zone named", status)
			}
			if eval[bool](t, ctx, visible("dimswrap")) || eval[bool](t, ctx, visible("pickwrap")) {
				t.Errorf("dims controls show for %s, a board without dims", "anchor_hot_30m")
			}
			periods := eval[[]string](t, ctx, `[...document.getElementById("period").options].map((o) => o.textContent)`)
			if want := []string{"26 Nov 2026 14:00–14:30", "26 Nov 2026 13:30–14:00"}; !slices.Equal(periods, want) {
				t.Errorf("period options %q, want %q", periods, want)
			}
			if shots := os.Getenv(screenshotsEnv); shots != "" {
				screenshot(t, ctx, size.w, size.h, size.mobile, filepath.Join(shots, "page-"+size.name+".png"))
				do(t, ctx, chromedp.Navigate(srv.URL+"/?board=anchor_hot_zone_30m&dims=zone:north"))
				waitFor(t, ctx, "the dims picker", visible("pickwrap"))
				screenshot(t, ctx, size.w, size.h, size.mobile, filepath.Join(shots, "page-zone-"+size.name+".png"))
			}

			// a board with dims: its dims box and picker show
			do(t, ctx, chromedp.Navigate(srv.URL+"/?board=anchor_hot_zone_30m&dims=zone:north"))
			waitFor(t, ctx, "the dims picker", visible("pickwrap")+` && document.getElementById("dimspick").options.length === 3`)
			if !eval[bool](t, ctx, visible("dimswrap")) {
				t.Error("no dims box for anchor_hot_zone_30m, a board with dims")
			}
			checkAlignment(t, ctx)
			if !size.mobile {
				// the header holds on one line: every control's middle is
				// within 4 px of the title's
				mids := eval[[]float64](t, ctx, `[...document.querySelectorAll("header h1, header label")]
					.filter((e) => e.getClientRects().length > 0)
					.map((e) => { const r = e.getBoundingClientRect(); return r.top + r.height / 2; })`)
				for i, m := range mids {
					if math.Abs(m-mids[0]) > 4 {
						t.Errorf("header item %d's middle at y=%.0f, the title's at y=%.0f: the header wraps (%v)", i, m, mids[0], mids)
					}
				}
			}
		})
	}

	t.Run("periods", func(t *testing.T) {
		ctx := tab(t, b, 1280, 800, false, true)
		// a raw period id in the URL: shown by its label, kept in the URL
		do(t, ctx, chromedp.Navigate(hot+"&period=20261126T1330"))
		if got := rowMembers(dom(t, ctx)); !slices.Equal(got, []string{"a100002", "a100003", "a100001"}) {
			t.Errorf("rows of 20261126T1330: %q", got)
		}
		if s := eval[string](t, ctx, `document.querySelector("#status .when").textContent`); s != "26 Nov 2026 13:30–14:00" {
			t.Errorf("period label %q, want 26 Nov 2026 13:30–14:00", s)
		}
		if v := eval[string](t, ctx, `document.getElementById("period").value`); v != "20261126T1330" {
			t.Errorf("period control %q, want the raw id", v)
		}
		for _, tt := range []struct{ board, label string }{
			{"anchor_7d", "last 7 days"},
			{"anchor_luck_day", "26 Nov 2026"},
			{"anchor_total", "all time"},
		} {
			do(t, ctx, chromedp.Navigate(srv.URL+"/?board="+tt.board))
			if s := eval[string](t, ctx, `document.querySelector("#status .when").textContent`); s != tt.label {
				t.Errorf("%s: period label %q, want %q", tt.board, s, tt.label)
			}
		}
		do(t, ctx, chromedp.Navigate(srv.URL+"/?board=anchor_7d&period=previous"))
		if s := eval[string](t, ctx, `document.querySelector("#status .when").textContent`); s != "7 days to 25 Nov 2026" {
			t.Errorf("anchor_7d previous: period label %q", s)
		}
		// picking the previous period: the URL says previous, the page shows
		// its label once refreshed
		do(t, ctx, chromedp.Navigate(hot), chromedp.Evaluate[chromedp.Void](`(() => {
			const p = document.getElementById("period"); p.value = "previous"; p.dispatchEvent(new Event("change"));
		})()`))
		if s := eval[string](t, ctx, `location.search`); s != "?board=anchor_hot_30m&period=previous" {
			t.Errorf("URL %s after picking previous", s)
		}
		waitFor(t, ctx, "the previous period's rows", `document.querySelector("#status .when").textContent === "26 Nov 2026 13:30–14:00"`)
	})

	t.Run("refresh", func(t *testing.T) {
		ctx := tab(t, b, 1280, 800, false, true)
		do(t, ctx, chromedp.Navigate(hot))
		add(ranking.Update{Board: "anchor_hot_30m", Member: "a100099", Value: 9999999, Time: time.Date(2026, 11, 26, 6, 9, 0, 0, time.UTC)})
		waitFor(t, ctx, "the new leader after a refresh", `document.querySelector('tr[data-testid="row"]').dataset.member === "a100099"`)
		if s := eval[string](t, ctx, `location.search`); s != "?board=anchor_hot_30m" {
			t.Errorf("URL %s after a refresh, want it as loaded", s)
		}
	})
}

// screenshot saves a PNG of the tab's viewport to path, after checking
// that it is a picture of the viewport's size.
func screenshot(t *testing.T, ctx context.Context, w, h int64, mobile bool, path string) {
	t.Helper()
	data, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	scale := int64(1)
	if mobile {
		scale = 2
	}
	if b := img.Bounds(); int64(b.Dx()) != w*scale || int64(b.Dy()) != h*scale {
		t.Errorf("screenshot is %v, want %dx%d", b, w*scale, h*scale)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
