// Package deployments holds the files that run rankd outside `go run`: the
// Dockerfile, Prometheus and Grafana provisioning and Kubernetes manifests
// (compose and the image run config/example.yaml, the k8s base an exact
// copy of it). There is no Docker engine on the development and CI
// machines, so these tests keep the files correct by construction: they
// parse docker-compose.yml (repository root) and every file here, build the
// Kubernetes kustomizations with kustomize's krusty, and check that each
// file, port, topic, path, probe and metric name one of them refers to
// exists and agrees with rankd's config, its command and its metrics.
package deployments

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// Paths of the files under test, relative to the repository root.
const (
	composeFile     = "docker-compose.yml"
	dockerfile      = "deployments/Dockerfile"
	exampleConfig   = "config/example.yaml"
	stackConfig     = exampleConfig // the config compose mounts and the image holds
	promConfig      = "deployments/prometheus/prometheus.yml"
	promAlerts      = "deployments/prometheus/alerts.yml"
	promAlertsTest  = "deployments/prometheus/alerts_test.yml"
	grafanaDSDir    = "deployments/grafana/provisioning/datasources"
	grafanaDashProv = "deployments/grafana/provisioning/dashboards"
	grafanaDashDir  = "deployments/grafana/dashboards"
	dashboardFile   = "deployments/grafana/dashboards/rankd.json"
	k8sDir          = "deployments/k8s"
	cmdDir          = "cmd/rankd"
)

// root returns the repository root (the parent of this package).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	return dir
}

// repoPath returns the absolute path of rel, a path relative to the root.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	return filepath.Join(root(t), filepath.FromSlash(rel))
}

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeYAML decodes the single YAML document of rel into v.
func decodeYAML(t *testing.T, rel string, v any) {
	t.Helper()
	if err := yaml.Unmarshal(readFile(t, rel), v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// exists reports whether rel exists under the root.
func exists(t *testing.T, rel string) bool {
	t.Helper()
	_, err := os.Stat(repoPath(t, rel))
	return err == nil
}

// port returns the port of a listen or dial address ("host:port", ":port").
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

// clearEnv unsets the environment overrides of the config for the test,
// so that the files are read as written.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"RANKD_KAFKA_BROKERS", "RANKD_REDIS_ADDR", "RANKD_REDIS_ADDRS", "RANKD_REDIS_PASSWORD", "RANKD_HTTP_LISTEN", "RANKD_CONFIG"} {
		t.Setenv(k, "")
	}
}

// loadStackConfig loads the config as rankd runs with it in the compose
// stack: the file compose mounts (config/example.yaml), with config.Load,
// under the environment of the compose service rankd (the Kafka and Redis
// addresses of the stack override the file's localhost).
func loadStackConfig(t *testing.T) *config.Config {
	t.Helper()
	clearEnv(t)
	for k, v := range loadCompose(t).service(t, "rankd").Environment {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(repoPath(t, stackConfig))
	if err != nil {
		t.Fatalf("config.Load(%s) with the environment of the compose service rankd: %v", stackConfig, err)
	}
	return cfg
}

// TestStackConfigLoads: the config of the compose stack (the example
// config under the compose service's environment) loads with the config
// package, and reaches Kafka and Redis at the compose services.
func TestStackConfigLoads(t *testing.T) {
	cfg := loadStackConfig(t)
	if len(cfg.Boards()) == 0 || len(cfg.Routes) == 0 {
		t.Errorf("%s declares no boards or routes", stackConfig)
	}
	if _, err := cfg.Router(); err != nil {
		t.Errorf("%s: %v", stackConfig, err)
	}
	if len(cfg.Kafka.Brokers) != 1 || cfg.Kafka.Brokers[0] != "kafka:9092" {
		t.Errorf("%s under the compose environment: kafka.brokers = %v, want [kafka:9092] (the compose service)", stackConfig, cfg.Kafka.Brokers)
	}
	if cfg.Redis.Addr != "redis:6379" {
		t.Errorf("%s under the compose environment: redis.addr = %q, want redis:6379 (the compose service)", stackConfig, cfg.Redis.Addr)
	}
}

// stringLiterals returns the string constants in the non-test Go files of
// the package in dir (relative to the root).
func stringLiterals(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoPath(t, dir), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	lits := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					lits[s] = true
				}
			}
			return true
		})
	}
	return lits
}

// knownEnv returns the environment variables rankd reads: the config
// package's Env* constants (config.EnvNames).
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	env := map[string]bool{}
	for _, name := range config.EnvNames() {
		env[name] = true
	}
	return env
}

// TestCommandHasWhatTheFilesRun: cmd/rankd exists and knows the
// subcommands and flags that the Dockerfile, compose and k8s run.
func TestCommandHasWhatTheFilesRun(t *testing.T) {
	if !exists(t, cmdDir) {
		t.Fatalf("%s does not exist: the Dockerfile builds it and compose runs it", cmdDir)
	}
	lits := stringLiterals(t, cmdDir)
	for lit := range lits { // a command's use line: its name, then its synopsis
		if f := strings.Fields(lit); len(f) > 1 {
			lits[f[0]] = true
		}
	}
	for _, name := range []string{
		"run", "produce", "healthcheck", // subcommands
		"config", "brokers", "rate", "url", // their flags
	} {
		if !lits[name] && !lits["--"+name] {
			t.Errorf("%s: no string literal %q: the deployment files run `rankd ... %s`", cmdDir, name, name)
		}
	}
}

// metricInfo is what rankd registers: every metric name and
// whether it is a histogram (whose series carry _bucket, _sum, _count),
// and every metric's type and HELP, as a metric family without series.
type metricInfo struct {
	names      map[string]bool
	histograms map[string]bool
	families   []*dto.MetricFamily
}

// recorder is a prometheus.Registerer that records the descriptors of what
// is registered on it (metric vectors have no series to gather until used).
type recorder struct {
	reg  *prometheus.Registry
	info metricInfo
}

var descRe = regexp.MustCompile(`fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*")`)

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	typ := metricType(c)
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRe.FindStringSubmatch(d.String())
		if m == nil {
			continue
		}
		name, err1 := strconv.Unquote(m[1])
		help, err2 := strconv.Unquote(m[2])
		if err1 != nil || err2 != nil {
			panic("recorder: cannot read " + d.String())
		}
		r.info.names[name] = true
		if typ == dto.MetricType_HISTOGRAM {
			r.info.histograms[name] = true
		}
		r.info.families = append(r.info.families, &dto.MetricFamily{Name: &name, Help: &help, Type: typ.Enum()})
	}
	return nil
}

// metricType is the type of the metrics c collects (UNTYPED when c is
// none of the client's own kinds).
func metricType(c prometheus.Collector) dto.MetricType {
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		return dto.MetricType_HISTOGRAM
	case prometheus.Gauge, *prometheus.GaugeVec: // before Counter: a Gauge has Inc and Add too
		return dto.MetricType_GAUGE
	case prometheus.Counter, *prometheus.CounterVec:
		return dto.MetricType_COUNTER
	}
	if m, ok := c.(prometheus.Metric); ok { // GaugeFunc, CounterFunc
		var pb dto.Metric
		if m.Write(&pb) == nil {
			switch {
			case pb.Gauge != nil:
				return dto.MetricType_GAUGE
			case pb.Counter != nil:
				return dto.MetricType_COUNTER
			}
		}
	}
	return dto.MetricType_UNTYPED
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// consumerMetrics builds rankd's metrics on a recorder, with a RankingSink,
// the store's maintenance loops and the HTTP API over the stack config (no
// server is contacted).
func consumerMetrics(t *testing.T) metricInfo {
	t.Helper()
	cfg := loadStackConfig(t)
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	st, err := store.New(rdb, cfg.Boards())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{reg: prometheus.NewRegistry(), info: metricInfo{names: map[string]bool{}, histograms: map[string]bool{}}}
	if _, err := consumer.NewRankingSink(cfg.Schemas(), router, st, consumer.WithRegisterer(rec)); err != nil {
		t.Fatal(err)
	}
	// The store's maintenance loops register theirs at start; with a done
	// context they return at once.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, run := range []func(context.Context, *store.Store, []*ranking.Board, store.Schedule) error{store.RunRollover, store.RunFinality} {
		if err := run(done, st, cfg.Boards(), store.Schedule{Registerer: rec}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.RunStandings(done, st, store.StandingsSchedule{Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	httpapi.New(st, httpapi.WithRegisterer(rec))
	if len(rec.info.names) == 0 {
		t.Fatal("the consumer package registered no metric")
	}
	return rec.info
}

var metricRef = regexp.MustCompile(`\brankd_[a-z0-9_]*[a-z0-9]`)

// checkMetricNames reports every rankd_* name in text that the consumer
// package does not define.
func checkMetricNames(t *testing.T, file string, text []byte, m metricInfo) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, name := range metricRef.FindAllString(string(text), -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && m.histograms[b] {
				base = b
			}
		}
		if !m.names[base] {
			t.Errorf("%s uses metric %s, which rankd does not register", file, name)
		}
		used[base] = true
	}
	return used
}

// TestMetricNames: every rankd_* metric that the alerts and the dashboard
// use is one the consumer package registers, and the dashboard shows what
// the issue asks for.
func TestMetricNames(t *testing.T) {
	m := consumerMetrics(t)
	checkMetricNames(t, promAlerts, readFile(t, promAlerts), m)
	checkMetricNames(t, promAlertsTest, readFile(t, promAlertsTest), m)
	used := checkMetricNames(t, dashboardFile, readFile(t, dashboardFile), m)
	for _, name := range []string{
		"rankd_consumer_messages_total",         // events/s per topic
		"rankd_sink_updates_applied_total",      // updates/s per board
		"rankd_consumer_lag_messages",           // lag per topic/partition
		"rankd_sink_event_lag_seconds",          // event to visible
		"rankd_consumer_dead_letters_total",     // dead letters by reason
		"rankd_consumer_apply_duration_seconds", // apply latency
		"rankd_rollover_duration_seconds",       // rollover duration
		"rankd_sink_redis_errors_total",         // Redis errors
		"rankd_consumer_retries_total",          // retries
	} {
		if !used[name] {
			t.Errorf("%s has no panel using %s", dashboardFile, name)
		}
	}
	var unused []string
	for name := range m.names {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	if len(unused) > 0 {
		t.Logf("metrics not on the dashboard: %v", unused)
	}
}

// dockerignore returns the patterns of the Dockerfile's ignore file.
func dockerignore(t *testing.T) []string {
	t.Helper()
	rel := dockerfile + ".dockerignore"
	if !exists(t, rel) {
		rel = ".dockerignore"
		if !exists(t, rel) {
			return nil
		}
	}
	var pats []string
	for line := range strings.Lines(string(readFile(t, rel))) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			pats = append(pats, line)
		}
	}
	return pats
}

// ignored reports whether the build context excludes rel (a simplified
// .dockerignore match: a pattern excludes the paths it matches and
// everything under them; no ! exceptions are expected).
func ignored(pats []string, rel string) (string, bool) {
	rel = filepath.ToSlash(filepath.Clean(rel))
	for _, p := range pats {
		if strings.HasPrefix(p, "!") {
			continue
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		for path := rel; path != "." && path != "/"; path = filepath.ToSlash(filepath.Dir(path)) {
			if ok, _ := filepath.Match(p, path); ok || (strings.HasPrefix(p, "**/") && matchBase(p[3:], path)) {
				return p, true
			}
		}
	}
	return "", false
}

func matchBase(p, path string) bool {
	ok, _ := filepath.Match(p, filepath.Base(path))
	return ok
}

// jsonDecode decodes rel as JSON into v, refusing unknown trailing data.
func jsonDecode(t *testing.T, rel string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(readFile(t, rel)))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	if dec.More() {
		t.Fatalf("%s: trailing data after the JSON value", rel)
	}
}
