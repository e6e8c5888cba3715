package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
)

// readmeBlock is a fenced block of the README marked for TestReadme by an
// HTML comment on the line before it: "<!-- readme-test -->" (a sh block
// run against rankd dev, exit 0, no API error in its output), "<!--
// readme-test: exit N -->" (exit N), "<!-- readme-test: output -->" (the
// exact output of the block before), "<!-- readme-test: build -->" (how
// to get the binary: the test builds it the same way).
type readmeBlock struct {
	line int    // of the opening fence
	mark string // "", "exit N", "output", "build"
	text string
}

var readmeMark = regexp.MustCompile(`^<!-- readme-test(?:: ([a-z0-9 ]+))? -->$`)

// readmeBlocks returns the marked blocks of the README at path.
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []readmeBlock
	for i := 0; i+1 < len(lines); i++ {
		m := readmeMark.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("%s:%d: a readme-test mark not followed by a fenced block", path, i+1)
		}
		b := readmeBlock{line: i + 2, mark: m[1]}
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			b.text += lines[j] + "\n"
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: unclosed block", path, b.line)
		}
		blocks = append(blocks, b)
		i = j
	}
	return blocks
}

// TestReadme runs the README's marked commands, as extracted from the
// README, top to bottom against `rankd dev` (broker and API on free ports
// that replace the README's 127.0.0.1:9092 and 127.0.0.1:8080), in a
// temp dir with the rankd binary first on PATH, so that they cannot drift
// from what rankd does.
func TestReadme(t *testing.T) {
	blocks := readmeBlocks(t, "../../README.md")
	var all string
	for _, b := range blocks {
		all += b.text
	}
	for _, want := range []string{"go install ./cmd/rankd", "kcat -P -b 127.0.0.1:9092", "rankd produce --brokers 127.0.0.1:9092 --file events.jsonl --restamp",
		"curl -s 'http://127.0.0.1:8080/v1/boards/anchor_7d/members/a7/around", "rankd replay --config rankd-dev.yaml --yes", "rankd config check broken.yaml"} {
		if !strings.Contains(all, want) {
			t.Errorf("no marked README block runs %q", want)
		}
	}
	bin := testenv.BuildRankd(t)
	dir := t.TempDir()
	env := append(cleanEnv(""), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	hp, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(hp))
	kafkaAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(kp))
	dev := startRankdIn(t, dir, bin, env, "dev", "--http", httpAddr, "--kafka", kafkaAddr, "--no-tui")
	dev.waitHTTP(60*time.Second, "http://"+httpAddr+"/readyz", func(code int, _ []byte) bool { return code == 200 })

	var last string // output of the last block run
	for _, b := range blocks {
		switch {
		case b.mark == "build":
			continue // the binary built above, as the block says
		case b.mark == "output":
			if last != b.text {
				t.Errorf("README.md:%d: the block before printed\n%s\nthe README shows\n%s", b.line, last, b.text)
			}
			continue
		}
		want := 0
		if n, ok := strings.CutPrefix(b.mark, "exit "); ok {
			want, _ = strconv.Atoi(n)
		}
		if strings.Contains(b.text, "kcat ") {
			if _, err := exec.LookPath("kcat"); err != nil {
				if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
					t.Fatalf("README.md:%d: kcat not found in PATH (apt-get install kcat) (CI=true: not skipping)", b.line)
				}
				t.Logf("README.md:%d: not run: kcat not found in PATH (apt-get install kcat)", b.line)
				continue
			}
		}
		script := strings.NewReplacer("127.0.0.1:8080", httpAddr, "127.0.0.1:9092", kafkaAddr).Replace(b.text)
		// The consumer applies within a moment of a produce: a block is run
		// again (all of them are idempotent) until it answers as shown.
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, out := runBash(t, dir, env, script)
			last = out
			ok := code == want && (want != 0 || !strings.Contains(out, `"error":`))
			if ok {
				t.Logf("README.md:%d: exit %d\n%.1500s", b.line, code, out)
				break
			}
			if time.Now().After(deadline) || dev.exited() {
				t.Fatalf("README.md:%d: exit %d, want %d (or an API error); output:\n%s\nrankd dev:\n%s", b.line, code, want, out, dev.out.tail(20))
			}
			time.Sleep(time.Second)
		}
	}
	if code := dev.interrupt(20 * time.Second); code != 0 {
		t.Fatalf("rankd dev exited %d; output:\n%s", code, dev.out.tail(40))
	}
}

// runBash runs script with bash -e in dir and returns its exit code and
// its stdout and stderr together.
func runBash(t *testing.T, dir string, env []string, script string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	default:
		t.Fatalf("bash: %v", err)
		return 0, ""
	}
}
