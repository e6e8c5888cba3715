package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking/store"
)

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// secureWorld is a TLS-only Redis with an ACL user (default user off,
// client certificates required), a Kafka broker with TLS and SCRAM-SHA-512,
// and a rankd config for both whose secrets come from the environment
// (Redis password, HTTP token) and a file (Kafka password).
type secureWorld struct {
	pki         *testenv.PKI
	redis       *testenv.TLSRedis        // standalone, or nil
	cluster     *testenv.TLSRedisCluster // or this
	broker      *testenv.Broker
	dir         string
	configPath  string
	kafkaPWFile string
	apiAddr     string
	metricsAddr string

	redisPW, kafkaPW, token string

	mu      sync.Mutex
	outputs strings.Builder // every log line and HTTP body seen, for the secret check
}

const secureConfig = `kafka:
  brokers: [%s]
  group: rankd-secure
  workers: 1
  batch: {count: 100, linger: 5ms}
  session_timeout: 2s
  heartbeat_interval: 200ms
  rebalance_timeout: 2s
  shutdown_timeout: 5s
  tls:
    enabled: true
    ca_file: pki/ca.pem
  sasl:
    mechanism: SCRAM-SHA-512
    username: rankd
    password_file: kafka-password
redis:
  %s
  username: rankd
  tls:
    enabled: true
    ca_file: pki/ca.pem
    cert_file: pki/client.pem
    key_file: pki/client-key.pem
http:
  listen: %s
  metrics_listen: %s
  read_header_timeout: 500ms
boards:
  - {name: total_coins, window: total}
routes:
  - {topic: gift, member: anchor_id, score: coins, boards: [total_coins]}
`

// redisACL is rankd's ACL: its keys only, no dangerous commands.
func redisACL(pw string) []string {
	return []string{"default off", "rankd on >" + pw + " ~rankd:* &* +@all -@dangerous"}
}

// newSecureWorld starts the servers (a Redis Cluster when cluster is true)
// and writes the config.
func newSecureWorld(t *testing.T, cluster bool) *secureWorld {
	t.Helper()
	w := &secureWorld{
		pki:     testenv.NewPKI(t),
		dir:     t.TempDir(),
		redisPW: "redis-Pw-7f3a9c1e", kafkaPW: "kafka-Pw-2b8d4e6f", token: "api-Token-5c0e1a9b7d3f",
		apiAddr: freeAddr(t), metricsAddr: freeAddr(t),
	}
	redisAddr := ""
	if cluster {
		w.cluster = testenv.NewTLSCluster(t, testenv.TLSRedisOptions{PKI: w.pki, ClientAuth: true, Users: redisACL(w.redisPW)})
		redisAddr = "addrs: [" + strings.Join(w.cluster.Addrs(), ", ") + "]"
	} else {
		w.redis = testenv.NewTLSRedis(t, testenv.TLSRedisOptions{PKI: w.pki, ClientAuth: true, Users: redisACL(w.redisPW),
			// Persistent, so that the outage subtest's restart loses nothing.
			Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
		redisAddr = "addr: " + w.redis.Addr()
	}
	w.broker = testenv.NewSecureKafka(t, testenv.SecureKafkaOptions{
		KafkaOptions: testenv.KafkaOptions{SeedTopics: map[string]int{"gift": 3, "rankd-dead-letter": 1}},
		TLS:          w.pki.ServerTLS(false),
		Users:        []testenv.SASLUser{{Mechanism: "SCRAM-SHA-512", User: "rankd", Pass: w.kafkaPW}}})
	// The config refers to the PKI relative to its own directory.
	if err := os.Symlink(w.pki.Dir, filepath.Join(w.dir, "pki")); err != nil {
		t.Fatal(err)
	}
	w.kafkaPWFile = filepath.Join(w.dir, "kafka-password")
	w.setKafkaPassword(t, w.kafkaPW)
	w.configPath = filepath.Join(w.dir, "rankd.yaml")
	src := fmt.Sprintf(secureConfig, strings.Join(w.broker.Addrs(), ", "), redisAddr, w.apiAddr, w.metricsAddr)
	if err := os.WriteFile(w.configPath, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"RANKD_CONFIG", "RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", "RANKD_HTTP_LISTEN",
		config.EnvRedisUsername, config.EnvKafkaSASLUsername, config.EnvKafkaSASLPassword, config.EnvHTTPMetricsListen} {
		t.Setenv(k, "")
	}
	t.Setenv(config.EnvRedisPassword, w.redisPW)
	t.Setenv(config.EnvHTTPToken, w.token)
	t.Cleanup(func() { assembly.SetRedisLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))) })
	return w
}

func (w *secureWorld) setKafkaPassword(t *testing.T, pw string) {
	t.Helper()
	if err := os.WriteFile(w.kafkaPWFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// record keeps text for the final secret check.
func (w *secureWorld) record(what, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(&w.outputs, "--- %s\n%s\n", what, text)
}

// rankd runs the command line in process and returns its exit code and
// output (stdout and stderr), recorded.
func (w *secureWorld) rankd(ctx context.Context, args ...string) (int, string) {
	var out syncBuffer
	code := run(ctx, args, &out, &out)
	w.record("rankd "+strings.Join(args, " "), out.String())
	return code, out.String()
}

// get sends a request with the token (if not empty) and returns the status
// and body, recorded.
func (w *secureWorld) get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	w.record("GET "+url, string(b))
	return resp.StatusCode, string(b)
}

// waitFor polls the URL until ok accepts the answer.
func (w *secureWorld) waitFor(t *testing.T, url, token string, timeout time.Duration, ok func(code int, body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := w.get(t, url, token)
		if ok(code, body) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not as expected after %v: %d %s", url, timeout, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produce writes gift events through TLS and SASL and returns the
// expected coins per anchor.
func (w *secureWorld) produce(t *testing.T, n int) map[string]int64 {
	t.Helper()
	cfg, err := config.Load(w.configPath)
	if err != nil {
		t.Fatal(err)
	}
	tr := secure.KafkaTransport(secure.KafkaDialer(cfg.Kafka))
	defer tr.CloseIdleConnections()
	wr := &kafka.Writer{Addr: kafka.TCP(cfg.Kafka.Brokers...), Topic: "gift", Transport: tr, Balancer: &kafka.Hash{},
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer wr.Close()
	want := map[string]int64{}
	ts := time.Now().Add(-time.Minute).UnixMilli()
	var msgs []kafka.Message
	for i := range n {
		anchor := fmt.Sprintf("a%d", i%4)
		coins := int64(10 + i)
		want[anchor] += coins
		v := fmt.Sprintf(`{"id":"g%d","ts":%d,"user_id":"u%d","anchor_id":%q,"room_id":"r1","zone":"z1","gift_id":"rose","count":1,"coins":%d}`,
			i, ts+int64(i), i%7, anchor, coins)
		msgs = append(msgs, kafka.Message{Key: []byte(anchor), Value: []byte(v)})
	}
	// And one that is not JSON: dead-lettered, through TLS and SASL too.
	msgs = append(msgs, kafka.Message{Key: []byte("bad"), Value: []byte(badEvent)})
	if err := wr.WriteMessages(t.Context(), msgs...); err != nil {
		t.Fatalf("producing over TLS+SASL: %v", err)
	}
	return want
}

const badEvent = "not json at all"

// deadLetters reads the dead-letter topic (one partition) through TLS and
// SASL until it holds n messages, and returns their values and reasons.
func (w *secureWorld) deadLetters(t *testing.T, n int) []string {
	t.Helper()
	cfg, err := config.Load(w.configPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.DeadLetterTopic, Partition: 0,
		Dialer: secure.KafkaDialer(cfg.Kafka), MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var out []string
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("reading the dead letters after %d: %v", len(out), err)
		}
		reason := ""
		for _, h := range m.Headers {
			if h.Key == "reason" {
				reason = string(h.Value)
			}
		}
		out = append(out, reason+": "+string(m.Value))
	}
	return out
}

// topOf decodes a top answer into member -> value.
func topOf(t *testing.T, body string) map[string]string {
	t.Helper()
	var top struct {
		Entries []struct {
			Member string      `json:"member"`
			Value  json.Number `json:"value"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		t.Fatalf("top: %v: %s", err, body)
	}
	got := map[string]string{}
	for _, e := range top.Entries {
		got[e.Member] = e.Value.String()
	}
	return got
}

func sameTop(got map[string]string, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for m, v := range want {
		if got[m] != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// TestSecureRun runs `rankd run` in process against a TLS-only Redis with
// an ACL user and a TLS + SCRAM-SHA-512 Kafka broker, with the API token
// and a separate metrics address: it consumes events into the board
// exactly; the API and /metrics need the token, the probes do not; the
// HTTP limits hold; a Redis outage shows no internals to clients; wrong
// passwords stop it at once with a clear error; and no secret appears in
// any log line, HTTP answer or `rankd config check` output.
func TestSecureRun(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	w := newSecureWorld(t, false)
	api, metrics := "http://"+w.apiAddr, "http://"+w.metricsAddr
	top := api + "/v1/boards/total_coins/top"

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := w.rankd(ctx, "run", "--config", w.configPath, "--log-level", "debug")
		done <- result{code, out}
	}()
	want := w.produce(t, 40)
	w.waitFor(t, top, w.token, 60*time.Second, func(code int, body string) bool {
		return code == 200 && sameTop(topOf(t, body), want)
	})

	t.Run("dead letters", func(t *testing.T) {
		if got := w.deadLetters(t, 1); len(got) != 1 || got[0] != "decode: "+badEvent {
			t.Fatalf("dead letters %q, want [%q]", got, "decode: "+badEvent)
		}
	})

	t.Run("token", func(t *testing.T) {
		for _, tt := range []struct {
			url, token string
			code       int
		}{
			{top, "", 401},
			{top, "wrong-token-0123456789", 401},
			{top, w.token + "x", 401},
			{top, w.token, 200},
			{top, "", 401},                       // cached now: a hit checks the token too
			{top, "wrong-token-0123456789", 401}, // (served before any routing)
			{api + "/v1/boards", "", 401},
			{api + "/", "", 401}, // the HTML page too
			{metrics + "/metrics", "", 401},
			{metrics + "/metrics", w.token, 200},
			{api + "/metrics", w.token, 404}, // served on metrics_listen only
			{api + "/healthz", "", 200},
			{api + "/readyz", "", 200},
			{metrics + "/healthz", "", 200},
			{metrics + "/readyz", "", 200},
			{metrics + "/v1/boards", w.token, 404}, // no API on the metrics address
		} {
			code, body := w.get(t, tt.url, tt.token)
			if code != tt.code {
				t.Errorf("GET %s (token %v): %d, want %d: %.200s", tt.url, tt.token != "", code, tt.code, body)
			}
			if code == 401 && body != `{"error":"missing or invalid bearer token","code":"unauthorized"}`+"\n" {
				t.Errorf("401 body %q", body)
			}
		}
		_, body := w.get(t, metrics+"/metrics", w.token)
		if !strings.Contains(body, "rankd_consumer_") {
			t.Errorf("/metrics without consumer metrics: %.300s", body)
		}
	})

	t.Run("limits", func(t *testing.T) {
		// A request body is refused.
		req, _ := http.NewRequest(http.MethodGet, top, strings.NewReader("hello"))
		req.Header.Set("Authorization", "Bearer "+w.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"code":"body_not_allowed"`) {
			t.Errorf("GET with a body: %d %s, want 413 body_not_allowed", resp.StatusCode, body)
		}
		// Headers beyond max_header_bytes (16 KiB): the answer, not a reset
		// (the rest of the request is drained before the close).
		req, _ = http.NewRequest(http.MethodGet, top, nil)
		req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(string(body), `"code":"headers_too_large"`) {
			t.Errorf("100 KiB header: %d %s, want 431 headers_too_large", resp.StatusCode, body)
		}
		// A client that never finishes its headers is disconnected after
		// read_header_timeout (500ms here).
		conn, err := net.Dial("tcp", w.apiAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		_, _ = io.WriteString(conn, "GET /v1/boards HTTP/1.1\r\nHost: x\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err = io.ReadAll(conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("a half-sent request held the connection for 15s")
		}
		t.Logf("half-sent request: connection closed by the server after %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("redis outage shows no internals", func(t *testing.T) {
		w.redis.Stop()
		body := w.waitFor(t, api+"/readyz", "", 30*time.Second, func(code int, body string) bool { return code == 503 })
		if body != "not ready: redis is unavailable\n" {
			t.Errorf("/readyz during the outage: %q", body)
		}
		time.Sleep(1100 * time.Millisecond) // past api.cache_ttl (1s): until then a cached page is served
		code, body := w.get(t, top, w.token)
		if code != 503 || body != `{"error":"redis is unavailable","code":"unavailable"}`+"\n" {
			t.Errorf("top during the outage: %d %q", code, body)
		}
		if err := w.redis.Start(); err != nil {
			t.Fatal(err)
		}
		w.waitFor(t, api+"/readyz", "", 60*time.Second, func(code int, body string) bool { return code == 200 })
	})

	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("rankd run did not stop within 60s of its context")
	}
	if r.code != cli.ExitOK {
		t.Fatalf("rankd run exited %d:\n%s", r.code, r.out)
	}
	if !strings.Contains(r.out, `"metrics_http":"`+w.metricsAddr+`"`) {
		t.Errorf("the start line does not name the metrics address:\n%s", r.out)
	}

	t.Run("config check", func(t *testing.T) {
		code, out := w.rankd(t.Context(), "config", "check", w.configPath)
		if code != cli.ExitOK {
			t.Fatalf("config check: %d\n%s", code, out)
		}
		for _, want := range []string{
			"security  redis tls on, ca " + filepath.Join(w.dir, "pki/ca.pem") + ", client cert " + filepath.Join(w.dir, "pki/client.pem") + ", user rankd, password: RANKD_REDIS_PASSWORD",
			"          kafka tls on, ca " + filepath.Join(w.dir, "pki/ca.pem") + ", sasl SCRAM-SHA-512 user rankd, password: file " + w.kafkaPWFile,
			"          http token: RANKD_HTTP_TOKEN, /metrics on " + w.metricsAddr,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("config check lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("replay", func(t *testing.T) {
		code, out := w.rankd(t.Context(), "replay", "--config", w.configPath, "--yes", "--progress", "none", "--drop-after", "0s", "--log-level", "debug")
		if code != cli.ExitOK {
			t.Fatalf("replay over TLS and SASL: %d\n%s", code, out)
		}
		// The board, rebuilt into a new generation, holds exactly the
		// events; read with the store's client of the config (TLS, ACL).
		cfg, err := config.Load(w.configPath)
		if err != nil {
			t.Fatal(err)
		}
		rdb := assembly.NewRedis(cfg.Redis)
		defer rdb.Close()
		st, err := assembly.NewStore(cfg, rdb, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		page, err := st.Top(t.Context(), "total_coins", nil, "", 100, store.RankRow)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range page.Entries {
			got[e.Member] = fmt.Sprint(e.Value)
		}
		if !sameTop(got, want) {
			t.Fatalf("after the replay: %v, want %v", got, want)
		}
	})

	t.Run("wrong passwords stop it at once", func(t *testing.T) {
		const wrongRedis, wrongKafka = "wrong-redis-Pw-1d2c", "wrong-kafka-Pw-9e8f"
		t.Setenv(config.EnvRedisPassword, wrongRedis)
		start := time.Now()
		code, out := w.rankd(t.Context(), "run", "--config", w.configPath, "--log-level", "debug")
		t.Logf("wrong Redis password: exit %d after %v", code, time.Since(start).Round(time.Millisecond))
		if code != cli.ExitFailure || !strings.Contains(out, "rankd run: redis: authentication failed (check redis.username and RANKD_REDIS_PASSWORD or redis.password_file): WRONGPASS") {
			t.Errorf("wrong Redis password: exit %d:\n%s", code, out)
		}
		t.Setenv(config.EnvRedisPassword, w.redisPW)
		w.setKafkaPassword(t, wrongKafka)
		start = time.Now()
		code, out = w.rankd(t.Context(), "run", "--config", w.configPath, "--log-level", "debug")
		t.Logf("wrong Kafka password: exit %d after %v", code, time.Since(start).Round(time.Millisecond))
		if code != cli.ExitFailure || !strings.Contains(out, "rankd run: kafka: SASL authentication failed (check kafka.sasl.username and RANKD_KAFKA_SASL_PASSWORD or kafka.sasl.password_file)") {
			t.Errorf("wrong Kafka password: exit %d:\n%s", code, out)
		}
		w.setKafkaPassword(t, w.kafkaPW)
		w.checkNoSecrets(t, wrongRedis, wrongKafka)
	})

	w.checkNoSecrets(t)
}

// TestSecureRunCluster: `rankd run` against a Redis Cluster of TLS-only
// masters (cluster bus over TLS, client certificates required, ACL user)
// and the TLS + SCRAM-SHA-512 broker consumes events into the board
// exactly and stops cleanly; nothing shows a secret.
func TestSecureRunCluster(t *testing.T) {
	testenv.Slow(t, "real rankd processes, minutes with -race")
	w := newSecureWorld(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		code, _ := w.rankd(ctx, "run", "--config", w.configPath, "--log-level", "debug")
		done <- code
	}()
	want := w.produce(t, 60)
	w.waitFor(t, "http://"+w.apiAddr+"/v1/boards/total_coins/top", w.token, 60*time.Second, func(code int, body string) bool {
		return code == 200 && sameTop(topOf(t, body), want)
	})
	w.waitFor(t, "http://"+w.metricsAddr+"/readyz", "", 30*time.Second, func(code int, body string) bool { return code == 200 })
	if code, body := w.get(t, "http://"+w.metricsAddr+"/metrics", w.token); code != 200 || !strings.Contains(body, "rankd_consumer_") {
		t.Errorf("/metrics: %d %.200s", code, body)
	}
	// The board's keys are on the cluster, under the ACL's pattern.
	n, err := w.cluster.AdminClient(t).Exists(t.Context(), "rankd:{total_coins}:t:all").Result()
	if err != nil || n != 1 {
		t.Fatalf("EXISTS rankd:{total_coins}:t:all on the cluster: %d, %v", n, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("rankd run exited %d", code)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("rankd run did not stop within 60s of its context")
	}
	w.checkNoSecrets(t)
}

// checkNoSecrets fails if a secret appears in anything recorded: every log
// line, HTTP body and command output of the test.
func (w *secureWorld) checkNoSecrets(t *testing.T, more ...string) {
	t.Helper()
	w.mu.Lock()
	all := w.outputs.String()
	w.mu.Unlock()
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(all))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines++
		for _, s := range append([]string{w.redisPW, w.kafkaPW, w.token}, more...) {
			if strings.Contains(sc.Text(), s) {
				t.Errorf("a secret appears in the output: %.500s", sc.Text())
			}
		}
	}
	if os.Getenv("RANKD_DUMP") != "" {
		_ = os.WriteFile(os.Getenv("RANKD_DUMP"), []byte(all), 0o600)
	}
	t.Logf("checked %d lines of logs, HTTP answers and outputs for %d secrets", lines, 3+len(more))
	if lines < 50 {
		t.Errorf("only %d lines recorded: the check saw too little", lines)
	}
}
