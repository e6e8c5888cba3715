package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/version"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
		{"no args", nil, 2, "", `Usage:\s+rankd \[flags\]\n\s+rankd \[command\]`},
		{"help", []string{"--help"}, 0, `Available Commands:(?s).*run .*dev .*produce .*rollover .*config .*healthcheck .*replay .*version .*bench`, ""},
		{"help word", []string{"help"}, 0, `Exit codes: 0 ok, 1 runtime failure, 2 usage`, ""},
		{"completion", []string{"completion", "bash"}, 0, `bash completion V2 for rankd`, ""},
		{"unknown command", []string{"serve"}, 2, "", `unknown command "serve"`},
		{"run help", []string{"run", "--help"}, 0, `(?s)Usage:\n  rankd run --config FILE.*--config file.*--log-format.*--session-timeout`, ""},
		{"run single-dash help", []string{"run", "-h"}, 0, `Usage:\n  rankd run`, ""},
		{"run bad flag", []string{"run", "--nope"}, 2, "", `rankd run: unknown flag: --nope \(see --help\)`},
		{"run no config", []string{"run"}, 2, "", `no config file: give --config FILE or set RANKD_CONFIG`},
		{"run missing file", []string{"run", "--config", "/nonexistent/rankd.yaml"}, 2, "", `reading config: open /nonexistent/rankd.yaml`},
		{"run broken config", []string{"run", "--config=" + broken}, 2, "",
			`(?s)broken.yaml:3:3: kafka.bogus: unknown key "bogus".*broken.yaml:6:13: boards\[0\].window: unknown value "sometimes"`},
		{"run bad log format", []string{"run", "--config", broken, "--log-format", "xml"}, 2, "", `--log-format "xml": want json or text`},
		{"run extra argument", []string{"run", "--config", broken, "extra"}, 2, "", `unexpected argument "extra"`},
		{"run extra argument before a flag", []string{"run", "extra", "--config", broken}, 2, "", `rankd run: unexpected argument "extra" \(see --help\)\n$`},
		{"dev help", []string{"dev", "--help"}, 0, `(?s)--http address.*127.0.0.1:8080.*--no-tui.*--rate float`, ""},
		{"dev usage line", []string{"dev", "--help"}, 0, `Usage:\n  rankd dev \[--http ADDR\] \[--kafka ADDR\] \[--rate N\] \[--seed N\] \[--no-tui\] \[--write-config FILE\] \[--log-format F\] \[--log-level L\]\n`, ""},
		{"dev help kafka", []string{"dev", "--help"}, 0, `\n      --kafka address +address the embedded Kafka broker listens on and advertises \(port 0: a free one\) \(default "127.0.0.1:9092"\)\n`, ""},
		{"dev bad kafka address", []string{"dev", "--kafka", "127.0.0.1:99999", "--write-config", ""}, 1, "", `kafka listen: listen tcp: address 99999: invalid port`},
		{"run help http", []string{"run", "--help"}, 0, `\n      --http address +address of the HTTP API, page, metrics and health`, ""},
		{"produce restamp without file", []string{"produce", "--restamp"}, 2, "", `^rankd produce: --restamp: only with --file\n$`},
		{"produce help", []string{"produce", "--help"}, 0, `(?s)70% like, 20% comment, 10% gift.*--brokers.*--count.*--duration.*--file.*--seed.*--start.*--topics`, ""},
		{"produce help brokers", []string{"produce", "--help"}, 0, `\n      --brokers brokers +comma-separated bootstrap brokers \(default: \$RANKD_KAFKA_BROKERS if set, else localhost:9092\)\n`, ""},
		{"produce bad start", []string{"produce", "--start", "yesterday"}, 2, "", `--start "yesterday": want RFC 3339`},
		{"produce bad topic", []string{"produce", "--topics", "gift,follow"}, 2, "", `unknown topic "follow"`},
		{"produce negative rate", []string{"produce", "--rate", "-1"}, 2, "", `must not be negative`},
		{"produce missing file", []string{"produce", "--file", "/nonexistent.jsonl"}, 2, "", `--file: open /nonexistent.jsonl`},
		{"rollover no config", []string{"rollover"}, 2, "", `no config file`},
		{"config no subcommand", []string{"config"}, 2, "", `rankd config: want a subcommand: check FILE`},
		{"config unknown subcommand", []string{"config", "lint", "x"}, 2, "", `unknown subcommand "lint" \(want check\)`},
		{"config check help", []string{"config", "check", "--help"}, 0, `file:line:column: field: message`, ""},
		{"config check broken", []string{"config", "check", broken}, 2, "", `broken.yaml:3:3: kafka.bogus: unknown key`},
		{"config check two files", []string{"config", "check", broken, broken}, 2, "", `one FILE at a time`},
		{"config help", []string{"config", "--help"}, 0, `(?s)Usage:\n  rankd config.*Available Commands:\n  check `, ""},
		{"config check --at after FILE", []string{"config", "check", "../../config/example.yaml", "--at", "2026-11-21T13:40:00+08:00"}, 0,
			`current   20261121T1330 \(2026-11-21 13:30 .. 2026-11-21 14:00 \+08:00\)`, ""},
		{"config check bad --at after FILE", []string{"config", "check", broken, "--at", "noon"}, 2, "", `^rankd config check: --at "noon": want RFC 3339\n$`},
		{"config check two files around a flag", []string{"config", "check", broken, "--at", "2026-11-21T13:40:00Z", broken}, 2, "", `one FILE at a time \(got 2\)`},
		{"config check FILE after --", []string{"config", "check", "--", "--at"}, 2, "", `reading config: open --at: no such file`},
		{"healthcheck help", []string{"healthcheck", "--help"}, 0, `--url URL`, ""},
		{"healthcheck bad url", []string{"healthcheck", "--url", "http://127.0.0.1:1/readyz"}, 1, "", `connection refused`},
		{"healthcheck malformed url", []string{"healthcheck", "--url", "notaurl"}, 2, "", `^rankd healthcheck: --url "notaurl": want an absolute http:// or https:// URL\n$`},
		{"healthcheck url without host", []string{"healthcheck", "--url", "http:///readyz"}, 2, "", `--url "http:///readyz": want an absolute`},
		{"healthcheck url of another scheme", []string{"healthcheck", "--url", "ftp://127.0.0.1/readyz"}, 2, "", `--url "ftp://127.0.0.1/readyz": want an absolute`},
		{"healthcheck url that does not parse", []string{"healthcheck", "--url", "http://[::1"}, 2, "", `--url "http://\[::1": want an absolute`},
		{"replay without a config", []string{"replay"}, 2, "", `rankd replay: no config file: give --config FILE or set RANKD_CONFIG`},
		{"replay --to without --dry-run", []string{"replay", "--config", "../../config/example.yaml", "--to", "2026-11-01T00:00:00Z"}, 2, "", `--to 2026-11-01T00:00:00Z: only with --dry-run`},
		{"replay unknown board", []string{"replay", "--config", "../../config/example.yaml", "--boards", "nope"}, 2, "", `--boards: no board "nope"`},
		{"replay help", []string{"replay", "--help"}, 0, `(?s)--boards.*--from.*--to.*--dry-run.*--yes`, ""},
		{"version", []string{"version"}, 0, versionShape, ""},
		{"--version", []string{"--version"}, 0, versionShape, ""},
		{"-v", []string{"-v"}, 0, versionShape, ""},
		{"version help", []string{"version", "--help"}, 0, `(?s)"rankd --version"\s+is the same.*Usage:\n  rankd version\n`, ""},
		{"version extra argument", []string{"version", "now"}, 2, "", `unexpected argument "now"`},
		{"bench unknown flag", []string{"bench", "--anything"}, 2, "", `unknown flag: --anything`},
		{"bench unknown phase", []string{"bench", "--skip", "naive,warp"}, 2, "", `rankd bench: skip "warp": not a phase \(naive, seed, rankd, memory, replay, latency, rollover, cost, reads\)`},
		{"bench no events", []string{"bench", "--events", "0"}, 2, "", `rankd bench: --events, --rollover-members, --partitions, --workers and --batch must be at least 1`},
		{"bench more naive events than events", []string{"bench", "--events", "10", "--naive-events", "20"}, 2, "", `rankd bench: naive events 20: at most the events \(10\)`},
		{"bench help", []string{"bench", "--help"}, 0, `(?s)Usage:\n  rankd bench .*--events.*--json.*--cpuprofile`, ""},
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

// versionShape is the output of "rankd version" (see version.Of).
const versionShape = `^rankd (devel|v\d+\.\d+\.\d+\S*) \(revision (unknown|[0-9a-f]{40})(, modified)?(, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)?, go1\.\d+[^,)]*\)\n$`

func TestConfigCheck(t *testing.T) {
	path := writeFile(t, "rankd.yaml", string(config.Example()))
	code, stdout, stderr := runCLI(t, "config", "check", "--at", "2026-11-21T13:40:00+08:00", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cfg, err := config.LoadBytes(path, config.Example())
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
		"redis     localhost:6379 db 0, prefix rankd, dedupe TTL 24h, 1000 updates per call",
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

// TestParseInterspersed checks that flags and positional arguments may come
// in any order (issue 11: "config check FILE --at T" took --at and T for
// files), and that "--" ends the flags.
func TestParseInterspersed(t *testing.T) {
	for _, tt := range []struct {
		args []string
		at   string
		n    int
		rest []string
	}{
		{nil, "", 0, nil},
		{[]string{"f.yaml"}, "", 0, []string{"f.yaml"}},
		{[]string{"--at", "T", "f.yaml"}, "T", 0, []string{"f.yaml"}},
		{[]string{"f.yaml", "--at", "T"}, "T", 0, []string{"f.yaml"}},
		{[]string{"f.yaml", "--at=T", "g.yaml", "--n", "3"}, "T", 3, []string{"f.yaml", "g.yaml"}},
		{[]string{"f.yaml", "--", "--at", "T"}, "", 0, []string{"f.yaml", "--at", "T"}},
		{[]string{"--n", "2", "--", "-", "--n"}, "", 2, []string{"-", "--n"}},
		{[]string{"-", "--n=1"}, "", 1, []string{"-"}},
	} {
		var at string
		var n int
		var rest []string
		c := cli.Spec{Use: "x", Args: cobra.ArbitraryArgs, Flags: func(fs *pflag.FlagSet) cli.RunFunc {
			fs.StringVar(&at, "at", "", "")
			fs.IntVar(&n, "n", 0, "")
			return func(_ context.Context, args []string, _, _ io.Writer) error {
				rest = args
				return nil
			}
		}}.Command()
		c.SetArgs(tt.args)
		if err := c.Execute(); err != nil {
			t.Errorf("parse(%q): %v", tt.args, err)
			continue
		}
		if at != tt.at || n != tt.n || !slices.Equal(rest, tt.rest) && len(rest)+len(tt.rest) > 0 {
			t.Errorf("parse(%q): at %q, n %d, args %q; want %q, %d, %q", tt.args, at, n, rest, tt.at, tt.n, tt.rest)
		}
	}
}

// TestHelpDefaults checks that the --help of every command (on stdout)
// shows at most one default per flag (issue 11: produce --help showed two
// for --brokers).
func TestHelpDefaults(t *testing.T) {
	for _, c := range specs() {
		if c.Hidden {
			continue
		}
		name, _, _ := strings.Cut(c.Use, " ")
		args := []string{name, "--help"}
		code, stdout, _ := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d", strings.Join(args, " "), code)
			continue
		}
		_, flags, ok := strings.Cut(stdout, "\nFlags:\n")
		if !ok {
			t.Errorf("%s: no flags listed", strings.Join(args, " "))
			continue
		}
		for _, line := range strings.Split(flags, "\n") {
			if n := strings.Count(line, "(default"); n > 1 {
				t.Errorf("%s: %d defaults in %s", strings.Join(args, " "), n, strings.TrimSpace(line))
			}
		}
	}
}

// testVersion checks that the built binary prints its own build
// information, and that a binary built with VCS stamping (which this
// environment may turn off with GOFLAGS=-buildvcs=false) names a commit of
// this repository.
func testVersion(t *testing.T, bin string) {
	check := func(bin string) (revision string) {
		t.Helper()
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		want := version.Of(bi, true) + "\n"
		for _, arg := range []string{"version", "--version"} {
			out, err := exec.Command(bin, arg).Output()
			if err != nil {
				t.Fatalf("rankd %s: %v", arg, err)
			}
			if string(out) != want {
				t.Errorf("rankd %s: %q, want %q", arg, out, want)
			}
			if !regexp.MustCompile(versionShape).Match(out) {
				t.Errorf("rankd %s: %q does not have the shape %s", arg, out, versionShape)
			}
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
		return ""
	}
	check(bin)

	requireProgram(t, "git", "apt-get install git") // fails under CI=true
	stamped := filepath.Join(t.TempDir(), "rankd")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", stamped, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	rev := check(stamped)
	if rev == "" {
		t.Fatal("go build -buildvcs=true: no vcs.revision in the build information")
	}
	if err := exec.Command("git", "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		t.Errorf("revision %s is not a commit of this repository: %v", rev, err)
	}
}

// TestConfigCheckSessionTimeoutWarning: `config check` prints the warning
// of a session timeout that a broker at Kafka's defaults refuses.
func TestConfigCheckSessionTimeoutWarning(t *testing.T) {
	src := strings.Replace(string(config.Example()), "  session_timeout: 10s", "  session_timeout: 1s ", 1)
	src = strings.Replace(src, "  heartbeat_interval: 1s", "  heartbeat_interval: 100ms", 1)
	if !strings.Contains(src, "session_timeout: 1s ") || !strings.Contains(src, "heartbeat_interval: 100ms") {
		t.Fatal("the example has no kafka.session_timeout 10s and heartbeat_interval 1s to change")
	}
	path := writeFile(t, "rankd.yaml", src)
	code, stdout, stderr := runCLI(t, "config", "check", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "          warning: kafka.session_timeout 1s is below 6s, Kafka's default group.min.session.timeout.ms: " +
		"such a broker refuses the join (INVALID_SESSION_TIMEOUT) and rankd never consumes; lower the broker's minimum or raise the timeout\n"
	if !strings.Contains(stdout, want) {
		t.Errorf("output lacks %q:\n%s", want, stdout)
	}
	// The example itself (default 10s) has no such warning.
	path = writeFile(t, "default.yaml", string(config.Example()))
	if _, stdout, _ := runCLI(t, "config", "check", path); strings.Contains(stdout, "session_timeout") {
		t.Errorf("warning with the default session timeout:\n%s", stdout)
	}
}
