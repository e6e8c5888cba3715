//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rankd/rankd/ranking/httpapi"
)

// chromiumPath is Debian's Chromium (package chromium).
const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium on url with extra flags and returns its
// standard output. It skips t when Chromium is not installed, or fails it
// under CI=true.
func chromium(t *testing.T, url string, flags ...string) []byte {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		msg := "headless Chromium not found at " + chromiumPath + ": install the Debian package chromium (apt-get install -y chromium)"
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(msg + " (CI=true: not skipping)")
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--disable-crash-reporter", "--no-default-browser-check",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000",
	}, flags...)
	cmd := exec.CommandContext(ctx, chromiumPath, append(args, url)...)
	// Chromium forks helpers: run it in its own process group and kill the
	// group on timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\nstderr:\n%s", flags, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

var (
	rowRe   = regexp.MustCompile(`<tr[^>]*data-testid="row"[^>]*>`)
	memRe   = regexp.MustCompile(`data-member="([^"]*)"`)
	trendRe = regexp.MustCompile(`data-testid="trend"[^>]*>([^<]*)<`)
)

// TestPageInBrowser loads the HTML page in headless Chromium: the DOM after
// the page's fetches holds the day board's top rows with their trend arrows,
// and a screenshot of it is a real picture.
func TestPageInBrowser(t *testing.T) {
	t.Parallel()
	srv, store := fixture(t)
	url := srv.URL + "/?board=day"

	t.Run("dom", func(t *testing.T) {
		dom := chromium(t, url, "--dump-dom")
		rows := rowRe.FindAll(dom, -1)
		var members []string
		for _, r := range rows {
			if m := memRe.FindSubmatch(r); m != nil {
				members = append(members, string(m[1]))
			}
		}
		if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(members, want) {
			t.Fatalf("rows %q, want members %q; DOM:\n%s", members, want, dom)
		}
		var trends []string
		for _, m := range trendRe.FindAllSubmatch(dom, -1) {
			trends = append(trends, string(m[1]))
		}
		if want := []string{"▲", "new", "▼", "▼", "new"}; !slices.Equal(trends, want) {
			t.Errorf("trend cells %q, want %q", trends, want)
		}
		if !bytes.Contains(dom, []byte(`data-testid="value">12.5<`)) {
			t.Errorf("no value cell 12.5 in DOM:\n%s", dom)
		}
	})

	t.Run("dims", func(t *testing.T) {
		dom := chromium(t, srv.URL+"/?board=zone&dims=room:7,zone:3", "--dump-dom")
		var members []string
		for _, r := range rowRe.FindAll(dom, -1) {
			if m := memRe.FindSubmatch(r); m != nil {
				members = append(members, string(m[1]))
			}
		}
		if want := []string{"y", "x", "z", "w"}; !slices.Equal(members, want) {
			t.Fatalf("rows %q, want members %q; DOM:\n%s", members, want, dom)
		}
	})

	// dims picker: the page of a dims board without dims lists the values
	// with members (from /dims) in a select; a harness page of the same
	// origin loads it in a frame, picks the value whose room is
	// "a:b,c d/é" as a user would (select + change event) and copies the
	// frame's picker and rows into its own DOM once the rows show.
	t.Run("dims picker", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.Handle("/", httpapi.New(store))
		mux.HandleFunc("GET /harness", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(pickHarness))
		})
		h := httptest.NewServer(mux)
		defer h.Close()
		dom := chromium(t, h.URL+"/harness", "--dump-dom")
		if !bytes.Contains(dom, []byte(`id="done"`)) {
			t.Fatalf("the harness did not finish; DOM:\n%s", dom)
		}
		for _, want := range []string{
			`data-testid="status">Pick a value of zone, room to see this board.<`,
			`>zone 3 · room 7 (4)</option>`,
			`>zone 3 · room a:b,c d/é (1)</option>`,
		} {
			if !bytes.Contains(dom, []byte(want)) {
				t.Errorf("no %s in DOM:\n%s", want, dom)
			}
		}
		var members []string
		for _, r := range rowRe.FindAll(dom, -1) {
			if m := memRe.FindSubmatch(r); m != nil {
				members = append(members, string(m[1]))
			}
		}
		if want := []string{"q/1"}; !slices.Equal(members, want) {
			t.Fatalf("rows %q after picking, want members %q; DOM:\n%s", members, want, dom)
		}
		if !bytes.Contains(dom, []byte(`data-testid="dims-url">?board=zone&amp;period=current&amp;dims=zone%3A3%2Croom%3Aa%3Ab%252Cc+d%2F%C3%A9<`)) {
			t.Errorf("the page's URL does not keep the picked dims; DOM:\n%s", dom)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(t.TempDir(), "shot.png")
		chromium(t, url, "--screenshot="+shot, "--window-size=1200,800", "--hide-scrollbars")
		data, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			t.Fatal("empty screenshot")
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("decoding screenshot: %v", err)
		}
		if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 800 {
			t.Errorf("screenshot is %v, want 1200x800", b)
		}
		colors := map[[4]uint32]bool{}
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 2 {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 2 {
				r, g, b, a := img.At(x, y).RGBA()
				colors[[4]uint32{r, g, b, a}] = true
			}
		}
		if len(colors) < 8 {
			t.Errorf("screenshot has %d colors: the page did not render", len(colors))
		}
		if dir := os.Getenv("RANKD_SCREENSHOT_DIR"); dir != "" { // keep it to look at
			_ = os.WriteFile(filepath.Join(dir, "page.png"), data, 0o644)
		}
	})
}

// pickHarness loads the page for the zone board without dims in a frame,
// records the status it shows, picks a dims value and copies the result.
const pickHarness = `<!doctype html><html><body>
<iframe id="f" src="/?board=zone" width="1000" height="600"></iframe>
<div id="out"></div>
<script>
"use strict";
const f = document.getElementById("f"), out = document.getElementById("out");
let status = "", picked = false;
function poll() {
  const d = f.contentDocument;
  const pick = d && d.getElementById("dimspick");
  if (!pick || pick.options.length < 3) return setTimeout(poll, 50);
  if (!picked) {
    status = d.getElementById("status").outerHTML;
    const o = [...pick.options].find((o) => o.textContent.includes("a:b,c d/é"));
    pick.value = o.value;
    pick.dispatchEvent(new Event("change"));
    picked = true;
  }
  if (!d.querySelector('tr[data-testid="row"]')) return setTimeout(poll, 50);
  const url = document.createElement("p");
  url.dataset.testid = "dims-url";
  url.textContent = f.contentWindow.location.search;
  out.innerHTML = status + pick.outerHTML + "<table>" + d.getElementById("rows").outerHTML + "</table>";
  out.append(url);
  const done = document.createElement("p");
  done.id = "done";
  out.append(done);
}
poll();
</script></body></html>`
