package deployments

import (
	"errors"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rankd/rankd/config"
)

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
		Ports    []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
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

type kustomization struct {
	Resources []string `yaml:"resources"`
}

// k8sObjects decodes every document of every manifest in deployments/k8s
// (except kustomization.yaml) and indexes them by kind and name.
type k8sObjects struct {
	files []string
	docs  map[string][]*yaml.Node // kind -> documents
}

func loadK8s(t *testing.T) k8sObjects {
	t.Helper()
	objs := k8sObjects{docs: map[string][]*yaml.Node{}}
	for _, f := range yamlFiles(t, k8sDir) {
		if path.Base(f) == "kustomization.yaml" {
			continue
		}
		objs.files = append(objs.files, path.Base(f))
		dec := yaml.NewDecoder(strings.NewReader(string(readFile(t, f))))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			objs.docs[o.Kind] = append(objs.docs[o.Kind], &n)
		}
	}
	return objs
}

// one decodes the only object of kind into v.
func (o k8sObjects) one(t *testing.T, kind string, v any) {
	t.Helper()
	docs := o.docs[kind]
	if len(docs) != 1 {
		t.Fatalf("%s: want one %s, got %d", k8sDir, kind, len(docs))
	}
	if err := docs[0].Decode(v); err != nil {
		t.Fatalf("%s: %s: %v", k8sDir, kind, err)
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

// TestK8sManifests: the Deployment runs the compose image with the config
// of the ConfigMap, its probes hit /healthz and /readyz on the named port
// that the config's http.listen opens, it runs non-root on a read-only root
// filesystem; the Service and the ServiceMonitor select it and scrape
// /metrics on that port; the kustomization lists every manifest.
func TestK8sManifests(t *testing.T) {
	objs := loadK8s(t)
	var (
		dep deployment
		cm  configMap
		svc service
		sm  serviceMonitor
		kus kustomization
	)
	objs.one(t, "Deployment", &dep)
	objs.one(t, "ConfigMap", &cm)
	objs.one(t, "Service", &svc)
	objs.one(t, "ServiceMonitor", &sm)
	decodeYAML(t, path.Join(k8sDir, "kustomization.yaml"), &kus)

	if got := slices.Sorted(slices.Values(kus.Resources)); !slices.Equal(got, objs.files) {
		t.Errorf("kustomization.yaml resources %v, want every manifest %v", got, objs.files)
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s, want monitoring.coreos.com/v1", sm.APIVersion)
	}

	// The ConfigMap's config loads and is the compose config with other
	// addresses, which it also gives as separate keys for the environment.
	clearEnv(t)
	embedded, ok := cm.Data["rankd.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s: no key rankd.yaml", cm.Metadata.Name)
	}
	name := filepath.Join(k8sDir, "configmap.yaml") + ":rankd.yaml"
	cfg, err := config.LoadBytes(name, []byte(embedded))
	if err != nil {
		t.Fatalf("ConfigMap rankd.yaml: %v", err)
	}
	if d := differingKeys(withoutAddresses(t, name, []byte(embedded)), withoutAddresses(t, stackConfig, readFile(t, stackConfig))); len(d) > 0 {
		t.Errorf("ConfigMap rankd.yaml differs from %s in %v (beyond the addresses); keep them in step", stackConfig, d)
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

	// Environment: variables rankd reads, from keys that exist and agree
	// with the embedded config.
	known := knownEnv(t)
	envFrom := map[string]string{}
	for _, e := range ctr.Env {
		if !known[e.Name] {
			t.Errorf("Deployment: environment %s is not a variable rankd reads", e.Name)
		}
		if e.ValueFrom == nil {
			envFrom[e.Name] = e.Value
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			v, ok := cm.Data[r.Key]
			if r.Name != cm.Metadata.Name || !ok {
				t.Errorf("Deployment: %s from ConfigMap %s key %s, which does not exist", e.Name, r.Name, r.Key)
			}
			envFrom[e.Name] = v
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil && !r.Optional {
			t.Errorf("Deployment: %s from Secret %s must be optional (the manifests do not create it)", e.Name, r.Name)
		}
	}
	if got, want := envFrom["RANKD_KAFKA_BROKERS"], strings.Join(cfg.Kafka.Brokers, ","); got != want {
		t.Errorf("Deployment: RANKD_KAFKA_BROKERS %q, the ConfigMap's rankd.yaml says %q", got, want)
	}
	if got := envFrom["RANKD_REDIS_ADDR"]; got != cfg.Redis.Addr {
		t.Errorf("Deployment: RANKD_REDIS_ADDR %q, the ConfigMap's rankd.yaml says %q", got, cfg.Redis.Addr)
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

	// Service and ServiceMonitor.
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
	if !subset(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) {
		t.Errorf("ServiceMonitor: selector %v does not match the Service labels %v", sm.Spec.Selector.MatchLabels, svc.Metadata.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor: want one endpoint, got %d", len(sm.Spec.Endpoints))
	}
	if ep := sm.Spec.Endpoints[0]; ep.Port != "http" || ep.Path != "/metrics" || ep.Interval != "15s" {
		t.Errorf("ServiceMonitor: endpoint %+v, want port http, path /metrics, interval 15s", ep)
	}
}

func isTrue(b *bool) bool { return b != nil && *b }
