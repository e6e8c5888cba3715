package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rankd/rankd/config"
)

// testDev is the `rankd dev` smoke test: start it, wait for the API, see
// non-empty boards, stop it with SIGINT, exit code 0 and nothing left
// behind. It runs with redis-server on PATH and with an empty PATH (the
// binary is prebuilt), where dev falls back to miniredis.
func testDev(t *testing.T, bin string) {
	t.Run("redis-server", func(t *testing.T) {
		requireProgram(t, "redis-server", "apt-get install redis-server")
		devSmoke(t, bin, "", "redis-server")
	})
	t.Run("miniredis", func(t *testing.T) {
		devSmoke(t, bin, t.TempDir(), "miniredis")
	})
}

func devSmoke(t *testing.T, bin, path, wantRedis string) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	start := time.Now()
	devConfig := filepath.Join(t.TempDir(), "rankd-dev.yaml")
	p := startRankd(t, bin, cleanEnv(path), "dev", "--http", strings.TrimPrefix(base, "http://"), "--kafka", "127.0.0.1:0",
		"--write-config", devConfig, "--rate", "500", "--no-tui")

	p.waitHTTP(60*time.Second, base+"/readyz", func(code int, _ []byte) bool { return code == 200 })
	t.Logf("ready after %v", time.Since(start).Round(time.Millisecond))
	for _, board := range []string{"anchor_hot_30m", "anchor_likes_day", "anchor_7d"} {
		body := p.waitHTTP(30*time.Second, base+"/v1/boards/"+board+"/top?limit=3", func(code int, body []byte) bool {
			var page struct {
				Entries []json.RawMessage `json:"entries"`
			}
			return code == 200 && json.Unmarshal(body, &page) == nil && len(page.Entries) > 0
		})
		t.Logf("%s: %.200s", board, body)
	}
	metrics := string(p.waitHTTP(10*time.Second, base+"/metrics", func(code int, _ []byte) bool { return code == 200 }))
	for _, name := range []string{"rankd_consumer_messages_total", "rankd_sink_updates_applied_total", "rankd_http_requests_total",
		"rankd_rollover_duration_seconds", "process_cpu_seconds_total", "go_goroutines"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	p.waitHTTP(10*time.Second, base+"/healthz", func(code int, _ []byte) bool { return code == 200 })
	// The written config is the one dev runs: its addresses are dev's.
	cfg, err := config.Load(devConfig)
	if err != nil {
		t.Fatalf("the config dev wrote: %v", err)
	}
	out := p.out.String()
	for _, addr := range []string{"kfake (in process) on " + cfg.Kafka.Brokers[0] + ",", " on " + cfg.Redis.Addr + "\n"} {
		if !strings.Contains(out, addr) {
			t.Errorf("%s: the banner has no %q:\n%s", devConfig, addr, out)
		}
	}
	if cfg.HTTP.Listen != strings.TrimPrefix(base, "http://") {
		t.Errorf("%s: http.listen %q, want %q", devConfig, cfg.HTTP.Listen, strings.TrimPrefix(base, "http://"))
	}

	if code := p.interrupt(10 * time.Second); code != 0 {
		t.Fatalf("rankd dev exited %d after SIGINT, want 0; output:\n%s", code, p.out.tail(40))
	}
	if _, err := os.Stat(devConfig); !os.IsNotExist(err) {
		t.Errorf("%s left behind (stat: %v)", devConfig, err)
	}
	out = p.out.String()
	if !strings.Contains(out, "redis  "+wantRedis) {
		t.Errorf("banner does not name %s as the Redis:\n%s", wantRedis, out)
	}
	if !strings.Contains(out, "rankd dev: stopped") {
		t.Errorf("no clean stop message:\n%s", p.out.tail(20))
	}
	// the redis-server's temp dir is gone, and so is the server
	if m := regexp.MustCompile(`data in (\S+)\) on (\S+)`).FindStringSubmatch(out); m != nil {
		if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
			t.Errorf("redis-server temp dir %s left behind (stat: %v)", m[1], err)
		}
		if c, err := net.DialTimeout("tcp", m[2], time.Second); err == nil {
			c.Close()
			t.Errorf("redis-server still answers on %s after rankd dev exited", m[2])
		}
	} else if wantRedis == "redis-server" {
		t.Errorf("banner does not name the redis-server data dir:\n%s", out)
	}
	t.Logf("rankd dev output:\n%s", p.out.tail(12))
}
