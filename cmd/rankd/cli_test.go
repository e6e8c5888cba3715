package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rankd/rankd/config"
)

// runCLI runs the command line in process and returns its exit code and
// outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExitCodesAndHelp(t *testing.T) {
	t.Setenv("RANKD_CONFIG", "")
	broken := writeFile(t, "broken.yaml", "kafka:\n  brokers: [a]\n  bogus: 1\nboards:\n  - name: x\n    window: sometimes\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // regexp, "" = anything
		stderr string
	}{
		{"no args", nil, 2, "", `Usage:\s+rankd <command>`},
		{"help", []string{"--help"}, 0, `Commands:(?s).*run .*dev .*produce .*rollover .*config .*healthcheck .*replay .*bench`, ""},
		{"help word", []string{"help"}, 0, `Exit codes: 0 ok, 1 runtime failure, 2 usage`, ""},
		{"unknown command", []string{"serve"}, 2, "", `unknown command "serve"`},
		{"run help", []string{"run", "--help"}, 0, "", `(?s)Usage: rankd run --config FILE.*--config file.*--log-format.*--session-timeout`},
		{"run single-dash help", []string{"run", "-h"}, 0, "", `Usage: rankd run`},
		{"run bad flag", []string{"run", "--nope"}, 2, "", `flag provided but not defined: -nope`},
		{"run no config", []string{"run"}, 2, "", `no config file: give --config FILE or set RANKD_CONFIG`},
		{"run missing file", []string{"run", "--config", "/nonexistent/rankd.yaml"}, 2, "", `reading config: open /nonexistent/rankd.yaml`},
		{"run broken config", []string{"run", "--config=" + broken}, 2, "",
			`(?s)broken.yaml:3:3: kafka.bogus: unknown key "bogus".*broken.yaml:6:13: boards\[0\].window: unknown value "sometimes"`},
		{"run bad log format", []string{"run", "--config", broken, "--log-format", "xml"}, 2, "", `--log-format "xml": want json or text`},
		{"run extra argument", []string{"run", "--config", broken, "extra"}, 2, "", `unexpected argument "extra"`},
		{"dev help", []string{"dev", "--help"}, 0, "", `(?s)--http address.*127.0.0.1:8080.*--no-tui.*--rate float`},
		{"produce help", []string{"produce", "--help"}, 0, "", `(?s)70% like, 20% comment, 10% gift.*--brokers.*--count.*--duration.*--file.*--seed.*--start.*--topics`},
		{"produce bad start", []string{"produce", "--start", "yesterday"}, 2, "", `--start "yesterday": want RFC 3339`},
		{"produce bad topic", []string{"produce", "--topics", "gift,follow"}, 2, "", `unknown topic "follow"`},
		{"produce negative rate", []string{"produce", "--rate", "-1"}, 2, "", `must not be negative`},
		{"produce missing file", []string{"produce", "--file", "/nonexistent.jsonl"}, 2, "", `--file: open /nonexistent.jsonl`},
		{"rollover no config", []string{"rollover"}, 2, "", `no config file`},
		{"config no subcommand", []string{"config"}, 2, "", `Usage: rankd config check FILE`},
		{"config unknown subcommand", []string{"config", "lint", "x"}, 2, "", `unknown subcommand "lint"`},
		{"config check help", []string{"config", "check", "--help"}, 0, "", `file:line:column: field: message`},
		{"config check broken", []string{"config", "check", broken}, 2, "", `broken.yaml:3:3: kafka.bogus: unknown key`},
		{"config check two files", []string{"config", "check", broken, broken}, 2, "", `one FILE at a time`},
		{"healthcheck help", []string{"healthcheck", "--help"}, 0, "", `--url URL`},
		{"healthcheck bad url", []string{"healthcheck", "--url", "http://127.0.0.1:1/readyz"}, 1, "", `connection refused`},
		{"replay without a config", []string{"replay"}, 2, "", `rankd replay: no config file: give --config FILE or set RANKD_CONFIG`},
		{"replay --to without --dry-run", []string{"replay", "--config", "../../config/example.yaml", "--to", "2026-11-01T00:00:00Z"}, 2, "", `--to 2026-11-01T00:00:00Z: only with --dry-run`},
		{"replay unknown board", []string{"replay", "--config", "../../config/example.yaml", "--boards", "nope"}, 2, "", `--boards: no board "nope"`},
		{"replay help", []string{"replay", "--help"}, 0, "", `(?s)--boards.*--from.*--to.*--dry-run.*--yes`},
		{"bench", []string{"bench", "--anything"}, 2, "", `rankd bench: not implemented yet: tracked by its own issue`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if tt.stdout != "" && !regexp.MustCompile(tt.stdout).MatchString(stdout) {
				t.Errorf("stdout does not match %q:\n%s", tt.stdout, stdout)
			}
			if tt.stderr != "" && !regexp.MustCompile(tt.stderr).MatchString(stderr) {
				t.Errorf("stderr does not match %q:\n%s", tt.stderr, stderr)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	path := writeFile(t, "rankd.yaml", string(config.Example))
	code, stdout, stderr := runCLI(t, "config", "check", "--at", "2026-11-21T13:40:00+08:00", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cfg, err := config.LoadBytes(path, config.Example)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range cfg.Boards() {
		if !strings.Contains(stdout, "\n"+b.Name+": "+b.Title+"\n") {
			t.Errorf("board %s is not listed", b.Name)
		}
	}
	for _, want := range []string{
		"rankd.yaml: ok: 9 boards, 5 routes",
		"window    periodic, every 30m, grace 5m, retention 1h5m",
		"timezone  Asia/Shanghai (weeks start Monday)",
		"keys      rankd:{anchor_hot_zone_30m|<zone>}:p:<period>",
		"current   20261121T1330 (2026-11-21 13:30 .. 2026-11-21 14:00 +08:00)",
		"window    rolling, last 7 × 1d",
		"keys      rankd:{anchor_7d}:r:<period> (window sums), rankd:{anchor_7d}:p:<period> (periods)",
		"current   20261121 (2026-11-21 00:00 .. 2026-11-22 00:00 +08:00)",
		"ranking   sum, desc, tiebreak first",
		"score     41 value bits (max 2199023255551) + 11 tie bits, ties in 1s",
		"ranking  sum, desc, tiebreak none, keep top 1000, with base",
		"keys     rankd:{hot_news}:t:all",
		`[0] gift when gift_id == "ice_castle": member anchor_id, score count -> anchor_luck_day, anchor_luck_total`,
		"[4] comment when news_id != \"\": member news_id, score 432, base news_ts / 1000 -> hot_news",
		"redis     localhost:6379 db 0, prefix rankd, dedupe TTL 24h",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(stdout)
	}

	t.Run("RANKD_CONFIG", func(t *testing.T) {
		t.Setenv("RANKD_CONFIG", path)
		if code, _, stderr := runCLI(t, "config", "check"); code != 0 {
			t.Errorf("exit %d: %s", code, stderr)
		}
	})
}

// TestConfigCheckDefaultRetention checks the retention config check prints
// when the file gives none: 2 periods plus the grace (issue 12: a 30m board
// with grace 72h showed retention 1h, which the same file refuses when
// written out).
func TestConfigCheckDefaultRetention(t *testing.T) {
	path := writeFile(t, "rankd.yaml", `kafka: {brokers: ["localhost:9092"]}
redis: {addr: "localhost:6379"}
boards:
  - name: late_30m
    every: 30m
    grace: 72h
  - name: day
    every: 1d
    grace: 1h
  - name: roll
    window: rolling
    periods: 3
    every: 30m
    grace: 72h
routes:
  - topic: gift
    member: anchor_id
    boards: [late_30m, day, roll]
`)
	code, stdout, stderr := runCLI(t, "config", "check", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"window    periodic, every 30m, grace 3d, retention 73h\n",
		"window    periodic, every 1d, grace 1h, retention 51h\n",
		"window    rolling, last 3 × 30m, grace 3d, retention 74h\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(stdout)
	}
}

func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "not ready: consumer group not joined", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	if code, stdout, stderr := runCLI(t, "healthcheck", "--url", srv.URL+"/healthz"); code != 0 || !strings.Contains(stdout, "200 OK") {
		t.Errorf("healthz: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr := runCLI(t, "healthcheck", "--url", srv.URL+"/readyz")
	if code != 1 || !strings.Contains(stderr, "503 Service Unavailable: not ready: consumer group not joined") {
		t.Errorf("readyz: exit %d, stderr %q; want 1 and the reason", code, stderr)
	}
}

func TestFormatValue(t *testing.T) {
	for _, tt := range []struct {
		v    int64
		dec  int
		want string
	}{
		{0, 0, "0"}, {1234, 0, "1234"}, {-5, 0, "-5"}, {1234, 2, "12.34"}, {5, 2, "0.05"}, {-5, 3, "-0.005"},
		{-1 << 63, 2, "-92233720368547758.08"},
	} {
		if got := formatValue(tt.v, tt.dec); got != tt.want {
			t.Errorf("formatValue(%d, %d) = %q, want %q", tt.v, tt.dec, got, tt.want)
		}
	}
}
