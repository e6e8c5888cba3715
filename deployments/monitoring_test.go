package deployments

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type promConfigFile struct {
	Global struct {
		ScrapeInterval string `yaml:"scrape_interval"`
	} `yaml:"global"`
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName        string `yaml:"job_name"`
		ScrapeInterval string `yaml:"scrape_interval"`
		MetricsPath    string `yaml:"metrics_path"`
		StaticConfigs  []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

type promRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestPrometheusConfig: Prometheus reads the mounted config and rule
// files, and scrapes rankd's /metrics at the service name and http.listen
// port every 5s.
func TestPrometheusConfig(t *testing.T) {
	c := loadCompose(t)
	cfg := loadStackConfig(t)
	prom := c.service(t, "prometheus")

	cfgPath, ok := prom.Command.flag("config.file")
	if !ok {
		cfgPath = "/etc/prometheus/prometheus.yml" // the image's default
	}
	if src, ok := prom.containerFile(t, cfgPath); !ok || src != promConfig {
		t.Errorf("prometheus: %s in the container is %q, want %s mounted", cfgPath, src, promConfig)
	}
	var pc promConfigFile
	decodeYAML(t, promConfig, &pc)
	if len(pc.RuleFiles) == 0 {
		t.Errorf("%s: no rule_files", promConfig)
	}
	var alertsLoaded bool
	for _, rf := range pc.RuleFiles {
		p := rf
		if !path.IsAbs(p) {
			p = path.Join(path.Dir(cfgPath), p) // relative to the config file
		}
		src, ok := prom.containerFile(t, p)
		switch {
		case !ok:
			t.Errorf("%s: rule file %s (%s in the container) is not mounted", promConfig, rf, p)
		case !exists(t, src):
			t.Errorf("%s: rule file %s is %s, which does not exist", promConfig, rf, src)
		case src == promAlerts:
			alertsLoaded = true
		}
	}
	if !alertsLoaded {
		t.Errorf("%s: rule_files do not load %s", promConfig, promAlerts)
	}

	listen := port(t, cfg.HTTP.Listen)
	var found bool
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName != "rankd" {
			continue
		}
		found = true
		if sc.ScrapeInterval != "5s" {
			t.Errorf("%s: job rankd scrapes every %q, want 5s", promConfig, sc.ScrapeInterval)
		}
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("%s: job rankd metrics_path %q, want /metrics", promConfig, sc.MetricsPath)
		}
		var n int
		for _, s := range sc.StaticConfigs {
			for _, target := range s.Targets {
				n++
				host, p, err := net.SplitHostPort(target)
				if err != nil {
					t.Errorf("%s: target %q: %v", promConfig, target, err)
					continue
				}
				if _, ok := c.Services[host]; !ok || host != "rankd" {
					t.Errorf("%s: target %s: want the rankd service", promConfig, target)
				}
				if p != listen {
					t.Errorf("%s: target %s: port %s, rankd listens on %s (%s)", promConfig, target, p, listen, stackConfig)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: job rankd has no targets", promConfig)
		}
	}
	if !found {
		t.Errorf("%s: no scrape job rankd", promConfig)
	}
	if !slices.Contains(prom.containerPorts(t), "9090") {
		t.Errorf("prometheus: port 9090 not published")
	}
}

// TestAlertRules: every rule is complete, and the alerts the issue asks
// for exist: consumer lag growing, dead letters, Redis errors, no events
// applied.
func TestAlertRules(t *testing.T) {
	var r promRules
	decodeYAML(t, promAlerts, &r)
	var exprs []string
	names := map[string]bool{}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				t.Errorf("%s: group %s: a rule without alert name (recording rules belong elsewhere)", promAlerts, g.Name)
				continue
			}
			if names[rule.Alert] {
				t.Errorf("%s: alert %s declared twice", promAlerts, rule.Alert)
			}
			names[rule.Alert] = true
			if strings.TrimSpace(rule.Expr) == "" {
				t.Errorf("%s: alert %s: no expr", promAlerts, rule.Alert)
			}
			if s := rule.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: alert %s: severity %q, want warning or critical", promAlerts, rule.Alert, s)
			}
			if rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("%s: alert %s: needs summary and description annotations", promAlerts, rule.Alert)
			}
			exprs = append(exprs, rule.Expr)
		}
	}
	for _, want := range []struct {
		what string
		re   string
	}{
		{"consumer lag growing", `(?s)rankd_consumer_lag_messages.*(deriv|delta|increase)\(|(deriv|delta|increase)\(.*rankd_consumer_lag_messages`},
		{"dead letters by reason", `(?s)by \(reason\).*rankd_consumer_dead_letters_total`},
		{"Redis errors", `rate\(rankd_sink_redis_errors_total`},
		{"no events applied", `(?s)rankd_consumer_messages_total.*rankd_sink_updates_applied_total`},
	} {
		re := regexp.MustCompile(want.re)
		if !slices.ContainsFunc(exprs, re.MatchString) {
			t.Errorf("%s: no alert for %s (an expr matching %s)", promAlerts, want.what, want.re)
		}
	}
}

type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string `yaml:"name"`
		UID       string `yaml:"uid"`
		Type      string `yaml:"type"`
		URL       string `yaml:"url"`
		IsDefault bool   `yaml:"isDefault"`
	} `yaml:"datasources"`
}

type grafanaProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name    string `yaml:"name"`
		Type    string `yaml:"type"`
		Options struct {
			Path string `yaml:"path"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource *dsRef     `json:"datasource"`
	Targets    []struct { // queries
		Datasource *dsRef `json:"datasource"`
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // of a collapsed row
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// yamlFiles lists the .yml and .yaml files of dir.
func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, ext := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(repoPath(t, dir), ext))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			out = append(out, path.Join(dir, filepath.Base(f)))
		}
	}
	slices.Sort(out)
	return out
}

// TestGrafana: the provisioned datasource is the compose Prometheus, the
// dashboard provider reads the mounted dashboards directory, and every
// panel of every dashboard queries that datasource.
func TestGrafana(t *testing.T) {
	c := loadCompose(t)
	graf := c.service(t, "grafana")
	prom := c.service(t, "prometheus")

	if src, ok := graf.bindSource(t, "/etc/grafana/provisioning"); !ok || src != "deployments/grafana/provisioning" {
		t.Errorf("grafana: /etc/grafana/provisioning is %q, want deployments/grafana/provisioning mounted", src)
	}
	if graf.Environment["GF_AUTH_ANONYMOUS_ENABLED"] != "true" || graf.Environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] != "Viewer" {
		t.Errorf("grafana: want anonymous Viewer access")
	}
	if !slices.Contains(graf.containerPorts(t), "3000") {
		t.Errorf("grafana: port 3000 not published")
	}

	uids := map[string]bool{}
	dsFiles := yamlFiles(t, grafanaDSDir)
	if len(dsFiles) == 0 {
		t.Fatalf("%s: no datasource file", grafanaDSDir)
	}
	for _, f := range dsFiles {
		var ds grafanaDatasources
		decodeYAML(t, f, &ds)
		if ds.APIVersion != 1 {
			t.Errorf("%s: apiVersion %d, want 1", f, ds.APIVersion)
		}
		for _, d := range ds.Datasources {
			uids[d.UID] = true
			if d.Type != "prometheus" {
				continue
			}
			u, err := url.Parse(d.URL)
			if err != nil {
				t.Errorf("%s: url %q: %v", f, d.URL, err)
				continue
			}
			if _, ok := c.Services[u.Hostname()]; !ok || u.Hostname() != "prometheus" {
				t.Errorf("%s: datasource %s at %s, want the prometheus service", f, d.Name, d.URL)
			}
			if !slices.Contains(prom.containerPorts(t), u.Port()) {
				t.Errorf("%s: datasource %s at port %s, prometheus serves %v", f, d.Name, u.Port(), prom.containerPorts(t))
			}
		}
	}
	if !uids["prometheus"] {
		t.Errorf("%s: no datasource with uid prometheus", grafanaDSDir)
	}

	provFiles := yamlFiles(t, grafanaDashProv)
	if len(provFiles) == 0 {
		t.Fatalf("%s: no dashboard provider", grafanaDashProv)
	}
	var dashDirs []string
	for _, f := range provFiles {
		var p grafanaProviders
		decodeYAML(t, f, &p)
		for _, pr := range p.Providers {
			src, ok := graf.containerFile(t, pr.Options.Path)
			if !ok || !exists(t, src) {
				t.Errorf("%s: provider %s reads %s, which is not mounted from the repository", f, pr.Name, pr.Options.Path)
				continue
			}
			dashDirs = append(dashDirs, src)
		}
	}
	if !slices.Contains(dashDirs, grafanaDashDir) {
		t.Errorf("no dashboard provider reads %s (mounted: %v)", grafanaDashDir, dashDirs)
	}

	jsons, _ := filepath.Glob(filepath.Join(repoPath(t, grafanaDashDir), "*.json"))
	if len(jsons) == 0 {
		t.Fatalf("%s: no dashboards", grafanaDashDir)
	}
	dashUIDs := map[string]string{}
	for _, f := range jsons {
		rel := path.Join(grafanaDashDir, filepath.Base(f))
		var d dashboard
		jsonDecode(t, rel, &d)
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: needs uid and title", rel)
		}
		if other, dup := dashUIDs[d.UID]; dup {
			t.Errorf("%s: uid %s already used by %s", rel, d.UID, other)
		}
		dashUIDs[d.UID] = rel
		checkPanels(t, rel, d.Panels, uids, map[int]bool{})
	}
}

func checkPanels(t *testing.T, file string, panels []panel, uids map[string]bool, ids map[int]bool) {
	t.Helper()
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("%s: panel id %d used twice", file, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			checkPanels(t, file, p.Panels, uids, ids)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", file, p.Title)
		}
		for _, ds := range []*dsRef{p.Datasource} {
			if ds == nil || !uids[ds.UID] {
				t.Errorf("%s: panel %q: datasource %v is not a provisioned uid", file, p.Title, ds)
			}
		}
		for _, q := range p.Targets {
			if q.Datasource != nil && !uids[q.Datasource.UID] {
				t.Errorf("%s: panel %q query %s: datasource uid %q is not provisioned", file, p.Title, q.RefID, q.Datasource.UID)
			}
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("%s: panel %q query %s: empty expr", file, p.Title, q.RefID)
			}
		}
	}
}

// dashboardExprs returns the PromQL of every panel query of rankd.json,
// with Grafana's interval variables replaced by a duration.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var d dashboard
	jsonDecode(t, dashboardFile, &d)
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, q := range p.Targets {
				e := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h").Replace(q.Expr)
				out = append(out, e)
			}
		}
	}
	walk(d.Panels)
	return out
}

// promtoolVersion matches the first line of `promtool --version`:
// "promtool, version 3.5.0 (branch: ..., revision: ...)".
var promtoolVersion = regexp.MustCompile(`^promtool, version v?(\d+)\.(\d+)\.(\d+)`)

// imageTag matches a version image tag: v3.5.0 or 3.5.0.
var imageTag = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)$`)

// prometheusImageVersion returns the version of the Prometheus image that
// docker-compose.yml deploys (prom/prometheus:vX.Y.Z): its major, and the
// Go module version of that release (Prometheus vX.Y.Z is the module
// github.com/prometheus/prometheus v0.X0Y.Z), which .ci/run installs.
func prometheusImageVersion(t *testing.T) (version, major, module string) {
	t.Helper()
	image := loadCompose(t).service(t, "prometheus").Image
	name, tag, _ := strings.Cut(image, ":")
	m := imageTag.FindStringSubmatch(tag)
	if path.Base(name) != "prometheus" || m == nil {
		t.Fatalf("%s: prometheus image %q, want prom/prometheus:vX.Y.Z", composeFile, image)
	}
	x, _ := strconv.Atoi(m[1])
	y, _ := strconv.Atoi(m[2])
	return strings.TrimPrefix(tag, "v"), m[1], fmt.Sprintf("v0.%d.%s", x*100+y, m[3])
}

// findPromtool returns the first promtool of the deployed image's major
// version, looking on PATH, then in the directory `go install` writes to
// ($GOBIN, else $GOPATH/bin), where .ci/run installs it. found lists every
// promtool seen, with its version.
func findPromtool(t *testing.T, major string) (bin, version string, found []string) {
	t.Helper()
	var candidates []string
	if p, err := exec.LookPath("promtool"); err == nil {
		candidates = append(candidates, p)
	}
	gobin := os.Getenv("GOBIN")
	if gobin == "" {
		out, err := exec.CommandContext(t.Context(), "go", "env", "GOBIN", "GOPATH").Output()
		if err == nil {
			lines := strings.Split(string(out), "\n")
			if gobin = strings.TrimSpace(lines[0]); gobin == "" && len(lines) > 1 && lines[1] != "" {
				gobin = filepath.Join(filepath.SplitList(strings.TrimSpace(lines[1]))[0], "bin")
			}
		}
	}
	if gobin != "" {
		candidates = append(candidates, filepath.Join(gobin, "promtool"))
	}
	seen := map[string]bool{}
	for _, c := range candidates {
		if real, err := filepath.EvalSymlinks(c); err == nil {
			c = real
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		out, err := exec.CommandContext(t.Context(), c, "--version").CombinedOutput()
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(out), "\n")
		m := promtoolVersion.FindStringSubmatch(first)
		if m == nil {
			found = append(found, fmt.Sprintf("%s (version unknown: %q)", c, first))
			continue
		}
		v := strings.Join(m[1:], ".")
		found = append(found, c+" "+v)
		if m[1] == major && bin == "" {
			bin, version = c, v
		}
	}
	return bin, version, found
}

// TestPromtool validates the Prometheus config, the alert rules, their
// unit tests (alerts_test.yml) and the dashboard's queries with a promtool
// of the major version that docker-compose.yml deploys (.ci/run builds it
// from the Go module github.com/prometheus/prometheus v0.X0Y.Z, which is
// Prometheus vX.Y.Z; Debian's is 2.x). Under CI=true a missing promtool,
// or only ones of another major, fails the test.
func TestPromtool(t *testing.T) {
	want, major, module := prometheusImageVersion(t)
	promtool, version, found := findPromtool(t, major)
	if promtool == "" {
		msg := fmt.Sprintf("no promtool %s.x found (docker-compose.yml deploys Prometheus %s; found: %v); "+
			"bash .ci/run installs it, or build it from github.com/prometheus/prometheus %s (cmd/promtool) into $(go env GOPATH)/bin",
			major, want, found, module)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if version != want {
		t.Logf("promtool %s (%s), the image is %s: same major, checks run", version, promtool, want)
	} else {
		t.Logf("promtool %s (%s)", version, promtool)
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	promDir := filepath.Dir(repoPath(t, promConfig))
	run(promDir, "check", "config", filepath.Base(promConfig))
	run(promDir, "check", "rules", filepath.Base(promAlerts))
	run(promDir, "test", "rules", filepath.Base(promAlertsTest))

	var sb strings.Builder
	sb.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		fmt.Fprintf(&sb, "      - record: dashboard:query_%d\n        expr: %q\n", i, e)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(dir, "check", "rules", "dashboard.yml")
}
