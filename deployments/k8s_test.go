package deployments

import (
	"bytes"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/rankd/rankd/config"
)

// deployments/k8s/base/config/rankd.yaml is a copy of config/example.yaml
// (kustomize reads no file outside a kustomization's directory);
// TestK8sConfigIsTheExample checks that they are equal.
//go:generate cp ../config/example.yaml k8s/base/config/rankd.yaml

type k8sMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type k8sObject struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
			SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe   *probe          `yaml:"livenessProbe"`
	ReadinessProbe  *probe          `yaml:"readinessProbe"`
	StartupProbe    *probe          `yaml:"startupProbe"`
	SecurityContext securityContext `yaml:"securityContext"`
	Resources       struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type deployment struct {
	k8sObject `yaml:",inline"`
	Spec      struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				SecurityContext securityContext `yaml:"securityContext"`
				Containers      []container     `yaml:"containers"`
				Volumes         []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name  string `yaml:"name"`
						Items []struct {
							Key  string `yaml:"key"`
							Path string `yaml:"path"`
						} `yaml:"items"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type configMap struct {
	k8sObject `yaml:",inline"`
	Data      map[string]string `yaml:"data"`
}

type service struct {
	k8sObject `yaml:",inline"`
	Spec      struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []servicePort     `yaml:"ports"`
	} `yaml:"spec"`
}

type servicePort struct {
	Name       string    `yaml:"name"`
	Port       int       `yaml:"port"`
	TargetPort yaml.Node `yaml:"targetPort"`
}

type serviceMonitor struct {
	k8sObject `yaml:",inline"`
	Spec      struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Endpoints []struct {
			Port     string `yaml:"port"`
			Path     string `yaml:"path"`
			Interval string `yaml:"interval"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

// Kustomize directories, relative to the repository root.
const (
	k8sBase       = k8sDir + "/base"                         // plain cluster
	k8sMonitor    = k8sDir + "/components/servicemonitor"    // optional Component
	k8sOverlay    = k8sDir + "/overlays/prometheus-operator" // base + component
	k8sConfig     = k8sBase + "/config/rankd.yaml"           // copy of config/example.yaml
	configRefresh = "go generate ./deployments"              // how to refresh k8sConfig
)

type kustomization struct {
	APIVersion         string   `yaml:"apiVersion"`
	Kind               string   `yaml:"kind"`
	Resources          []string `yaml:"resources"`
	Components         []string `yaml:"components"`
	ConfigMapGenerator []struct {
		Name     string   `yaml:"name"`
		Files    []string `yaml:"files"`
		Literals []string `yaml:"literals"`
	} `yaml:"configMapGenerator"`
}

// builtObject is one object of a kustomize build.
type builtObject struct {
	kind, name string
	yaml       []byte
	node       *yaml.Node
}

// k8sBuild is the output of a kustomize build, in kustomize's order.
type k8sBuild struct {
	dir  string
	objs []builtObject
}

// kustomizeBuild builds the kustomization in dir (relative to the root)
// in-process with kustomize's krusty, which is what `kubectl apply -k` and
// `kustomize build` run, with their default options (files only from
// within the kustomization's directory).
func kustomizeBuild(t *testing.T, dir string) k8sBuild {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), repoPath(t, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b := k8sBuild{dir: dir}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("kustomize build %s: %s %s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		var n yaml.Node
		if err := yaml.Unmarshal(y, &n); err != nil {
			t.Fatalf("kustomize build %s: %s %s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		var o k8sObject
		if err := n.Decode(&o); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("kustomize build %s: an object without apiVersion, kind or metadata.name:\n%s", dir, y)
		}
		b.objs = append(b.objs, builtObject{kind: o.Kind, name: o.Metadata.Name, yaml: y, node: &n})
	}
	return b
}

// kinds returns the kinds of the objects, sorted, one entry per object.
func (b k8sBuild) kinds() []string {
	var out []string
	for _, o := range b.objs {
		out = append(out, o.kind)
	}
	slices.Sort(out)
	return out
}

// one decodes the only object of kind into v.
func (b k8sBuild) one(t *testing.T, kind string, v any) {
	t.Helper()
	var found []builtObject
	for _, o := range b.objs {
		if o.kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("kustomize build %s: want one %s, got %d", b.dir, kind, len(found))
	}
	if err := found[0].node.Decode(v); err != nil {
		t.Fatalf("kustomize build %s: %s: %v", b.dir, kind, err)
	}
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// manifestFiles lists the YAML files directly in dir except
// kustomization.yaml, by base name.
func manifestFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range yamlFiles(t, dir) {
		if b := path.Base(f); b != "kustomization.yaml" {
			out = append(out, b)
		}
	}
	return out
}

// TestK8sConfigIsTheExample: the config that the base's ConfigMap is
// generated from is config/example.yaml, byte for byte.
func TestK8sConfigIsTheExample(t *testing.T) {
	if got, want := readFile(t, k8sConfig), readFile(t, exampleConfig); !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s; it must be an exact copy (kustomize reads no file outside %s): run `%s` and commit it", k8sConfig, exampleConfig, k8sBase, configRefresh)
	}
}

// TestK8sLayout: deployments/k8s and its base build the same objects
// (ConfigMap, Deployment, Service: nothing that needs a CRD); the
// servicemonitor directory is a kustomize Component holding the
// ServiceMonitor alone; the prometheus-operator overlay builds the base's
// objects unchanged plus exactly that ServiceMonitor. Every manifest of a
// directory is listed in its kustomization.
func TestK8sLayout(t *testing.T) {
	var top, base, comp, over kustomization
	decodeYAML(t, path.Join(k8sDir, "kustomization.yaml"), &top)
	decodeYAML(t, path.Join(k8sBase, "kustomization.yaml"), &base)
	decodeYAML(t, path.Join(k8sMonitor, "kustomization.yaml"), &comp)
	decodeYAML(t, path.Join(k8sOverlay, "kustomization.yaml"), &over)

	for dir, k := range map[string]kustomization{k8sBase: base, k8sMonitor: comp} {
		if got, want := slices.Sorted(slices.Values(k.Resources)), manifestFiles(t, dir); !slices.Equal(got, want) {
			t.Errorf("%s/kustomization.yaml: resources %v, want every manifest of the directory %v", dir, got, want)
		}
	}
	if comp.Kind != "Component" || comp.APIVersion != "kustomize.config.k8s.io/v1alpha1" {
		t.Errorf("%s: %s %s, want a kustomize.config.k8s.io/v1alpha1 Component", k8sMonitor, comp.APIVersion, comp.Kind)
	}
	if len(base.Components) > 0 || len(top.Components) > 0 {
		t.Errorf("%s: the base includes components %v; monitoring must stay optional", k8sDir, append(top.Components, base.Components...))
	}
	if want := "../../components/servicemonitor"; !slices.Contains(over.Components, want) {
		t.Errorf("%s: components %v, want %s", k8sOverlay, over.Components, want)
	}

	plain := kustomizeBuild(t, k8sBase)
	if got, want := plain.kinds(), []string{"ConfigMap", "Deployment", "Service"}; !slices.Equal(got, want) {
		t.Errorf("kustomize build %s: kinds %v, want %v", k8sBase, got, want)
	}
	for _, o := range plain.objs {
		var m k8sObject
		if err := o.node.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.APIVersion, "monitoring.coreos.com/") {
			t.Errorf("kustomize build %s: %s %s needs the Prometheus Operator's CRDs", k8sBase, o.kind, o.name)
		}
	}
	sameObjects := func(dir string, got, want []builtObject) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("kustomize build %s: %d objects besides the ServiceMonitor, the base has %d", dir, len(got), len(want))
			return
		}
		for i := range want {
			if got[i].kind != want[i].kind || got[i].name != want[i].name || !bytes.Equal(got[i].yaml, want[i].yaml) {
				t.Errorf("kustomize build %s: %s %s differs from the base's %s %s", dir, got[i].kind, got[i].name, want[i].kind, want[i].name)
			}
		}
	}
	sameObjects(k8sDir, kustomizeBuild(t, k8sDir).objs, plain.objs)

	monitored := kustomizeBuild(t, k8sOverlay)
	var rest, sms []builtObject
	for _, o := range monitored.objs {
		if o.kind == "ServiceMonitor" {
			sms = append(sms, o)
		} else {
			rest = append(rest, o)
		}
	}
	if len(sms) != 1 {
		t.Fatalf("kustomize build %s: %d ServiceMonitors, want 1", k8sOverlay, len(sms))
	}
	sameObjects(k8sOverlay, rest, plain.objs)
	var sm serviceMonitor
	if err := sms[0].node.Decode(&sm); err != nil {
		t.Fatal(err)
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s, want monitoring.coreos.com/v1", sm.APIVersion)
	}

	// The ServiceMonitor selects the base's Service and scrapes /metrics on
	// its port named http, which targets rankd's HTTP port.
	var svc service
	monitored.one(t, "Service", &svc)
	if !subset(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) {
		t.Errorf("ServiceMonitor: selector %v does not match the Service labels %v", sm.Spec.Selector.MatchLabels, svc.Metadata.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor: want one endpoint, got %d", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p servicePort) bool { return p.Name == ep.Port }) {
		t.Errorf("ServiceMonitor: endpoint port %q is not a port name of the Service", ep.Port)
	}
	if ep.Port != "http" || ep.Path != "/metrics" || ep.Interval != "15s" {
		t.Errorf("ServiceMonitor: endpoint %+v, want port http, path /metrics, interval 15s", ep)
	}
}

// TestK8sManifests, on the base as kustomize builds it: the ConfigMap is
// generated (name rankd-<hash>) from config/example.yaml, byte for byte,
// plus the cluster's Kafka and Redis addresses as separate keys; the
// Deployment runs the compose image with that config mounted (its
// references rewritten to the hashed name) and those addresses in the
// environment variables that override the file's; its probes hit /healthz
// and /readyz on the named port that the config's http.listen opens; it
// runs non-root on a read-only root filesystem; the Service selects it on
// that port.
func TestK8sManifests(t *testing.T) {
	b := kustomizeBuild(t, k8sBase)
	var (
		dep deployment
		cm  configMap
		svc service
	)
	b.one(t, "Deployment", &dep)
	b.one(t, "ConfigMap", &cm)
	b.one(t, "Service", &svc)

	// The ConfigMap: generated with a content hash in its name, so that a
	// config change rolls the pods.
	if hash, ok := strings.CutPrefix(cm.Metadata.Name, "rankd-"); !ok || hash == "" {
		t.Errorf("ConfigMap: name %q, want rankd-<hash> (the configMapGenerator rankd)", cm.Metadata.Name)
	}
	embedded, ok := cm.Data["rankd.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s: no key rankd.yaml", cm.Metadata.Name)
	}
	if embedded != string(readFile(t, exampleConfig)) {
		t.Errorf("ConfigMap %s: rankd.yaml is not %s (refresh %s with `%s`)", cm.Metadata.Name, exampleConfig, k8sConfig, configRefresh)
	}

	spec := dep.Spec.Template.Spec
	if dep.Spec.Replicas != 2 {
		t.Errorf("Deployment: replicas %d, want 2", dep.Spec.Replicas)
	}
	if !subset(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels) {
		t.Errorf("Deployment: selector %v does not match the pod labels %v", dep.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment: want one container, got %d", len(spec.Containers))
	}
	ctr := spec.Containers[0]
	if compose := loadCompose(t).service(t, "rankd"); ctr.Image != compose.Image {
		t.Errorf("Deployment: image %s, want the compose image %s", ctr.Image, compose.Image)
	}

	// Config: args --config FILE, FILE is the ConfigMap key mounted.
	args := stringList(ctr.Args)
	cfgPath, ok := args.flag("config")
	if len(args) == 0 || args[0] != "run" || !ok {
		t.Errorf("Deployment: args %v, want [run --config FILE]", ctr.Args)
	}
	var mounted bool
	for _, vm := range ctr.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil || v.ConfigMap.Name != cm.Metadata.Name {
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if path.Join(vm.MountPath, it.Path) == cfgPath && it.Key == "rankd.yaml" {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("Deployment: --config %s is not the ConfigMap %s key rankd.yaml mounted", cfgPath, cm.Metadata.Name)
	}

	// Environment: variables rankd reads, from keys of the generated
	// ConfigMap (a reference kustomize did not rewrite names a ConfigMap
	// that does not exist).
	known := knownEnv(t)
	env := map[string]string{}
	for _, e := range ctr.Env {
		if !known[e.Name] {
			t.Errorf("Deployment: environment %s is not a variable rankd reads", e.Name)
		}
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			v, ok := cm.Data[r.Key]
			if r.Name != cm.Metadata.Name || !ok {
				t.Errorf("Deployment: %s from ConfigMap %s key %s, which does not exist (the generated ConfigMap is %s)", e.Name, r.Name, r.Key, cm.Metadata.Name)
			}
			env[e.Name] = v
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil && !r.Optional {
			t.Errorf("Deployment: %s from Secret %s must be optional (the manifests do not create it)", e.Name, r.Name)
		}
	}

	// The config as the pod reads it: the mounted file with that
	// environment. Kafka and Redis are the cluster's, not the example's
	// localhost.
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.LoadBytes(k8sConfig, []byte(embedded))
	if err != nil {
		t.Fatalf("the pod's config: %v", err)
	}
	for _, addr := range append(slices.Clone(cfg.Kafka.Brokers), cfg.Redis.Addr) {
		host, p, err := net.SplitHostPort(addr)
		if err != nil || p == "" {
			t.Errorf("the pod's config: address %q: want host:port (%v)", addr, err)
			continue
		}
		if ip := net.ParseIP(host); host == "localhost" || host == "" || (ip != nil && ip.IsLoopback()) {
			t.Errorf("the pod's config: address %s is the pod itself; set kafka.brokers and redis.addr in the configMapGenerator of %s", addr, k8sBase)
		}
	}
	if got, want := strings.Join(cfg.Kafka.Brokers, ","), env["RANKD_KAFKA_BROKERS"]; got != want || want == "" {
		t.Errorf("the pod's config: kafka.brokers %q, want RANKD_KAFKA_BROKERS %q", got, want)
	}
	if got, want := cfg.Redis.Addr, env["RANKD_REDIS_ADDR"]; got != want || want == "" {
		t.Errorf("the pod's config: redis.addr %q, want RANKD_REDIS_ADDR %q", got, want)
	}

	// Port and probes.
	listen := port(t, cfg.HTTP.Listen)
	var httpPort int
	for _, p := range ctr.Ports {
		if p.Name == "http" {
			httpPort = p.ContainerPort
		}
	}
	if strconv.Itoa(httpPort) != listen {
		t.Errorf("Deployment: container port http = %d, want the http.listen port %s", httpPort, listen)
	}
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{
		{"livenessProbe", ctr.LivenessProbe, "/healthz"},
		{"readinessProbe", ctr.ReadinessProbe, "/readyz"},
		{"startupProbe", ctr.StartupProbe, "/healthz"},
	} {
		if pr.p == nil {
			if pr.name != "startupProbe" {
				t.Errorf("Deployment: no %s", pr.name)
			}
			continue
		}
		if pr.p.HTTPGet == nil || pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port.Value != "http" {
			t.Errorf("Deployment: %s must be httpGet %s on port http", pr.name, pr.path)
		}
	}

	// Security and resources.
	podSC, ctrSC := spec.SecurityContext, ctr.SecurityContext
	if !isTrue(podSC.RunAsNonRoot) && !isTrue(ctrSC.RunAsNonRoot) {
		t.Errorf("Deployment: runAsNonRoot is not set")
	}
	for _, u := range []*int64{podSC.RunAsUser, ctrSC.RunAsUser} {
		if u != nil && *u == 0 {
			t.Errorf("Deployment: runAsUser 0")
		}
	}
	if !isTrue(ctrSC.ReadOnlyRootFilesystem) {
		t.Errorf("Deployment: readOnlyRootFilesystem is not set")
	}
	if ctrSC.AllowPrivilegeEscalation == nil || *ctrSC.AllowPrivilegeEscalation {
		t.Errorf("Deployment: allowPrivilegeEscalation must be false")
	}
	if ctr.Resources.Requests["cpu"] == "" || ctr.Resources.Requests["memory"] == "" || ctr.Resources.Limits["memory"] == "" {
		t.Errorf("Deployment: want cpu and memory requests and a memory limit")
	}

	// Service.
	if !subset(svc.Spec.Selector, dep.Spec.Template.Metadata.Labels) {
		t.Errorf("Service: selector %v does not match the pods %v", svc.Spec.Selector, dep.Spec.Template.Metadata.Labels)
	}
	var svcPort string
	for _, p := range svc.Spec.Ports {
		if p.Name != "http" {
			continue
		}
		svcPort = p.Name
		if tp := p.TargetPort.Value; tp != "http" && tp != listen {
			t.Errorf("Service: port http targets %q, want the container port http", tp)
		}
		if strconv.Itoa(p.Port) != listen {
			t.Errorf("Service: port http is %d, want %s", p.Port, listen)
		}
	}
	if svcPort == "" {
		t.Errorf("Service: no port named http")
	}
}

func isTrue(b *bool) bool { return b != nil && *b }
