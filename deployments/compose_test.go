package deployments

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeSpec is the part of the Compose file the tests read.
type composeSpec struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string               `yaml:"image"`
	Build       *composeBuild        `yaml:"build"`
	Command     stringList           `yaml:"command"`
	Entrypoint  stringList           `yaml:"entrypoint"`
	Environment map[string]string    `yaml:"environment"`
	Ports       []string             `yaml:"ports"`
	Volumes     []string             `yaml:"volumes"`
	DependsOn   map[string]dependsOn `yaml:"depends_on"`
	Healthcheck *struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
	Restart  string   `yaml:"restart"`
	Profiles []string `yaml:"profiles"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

type dependsOn struct {
	Condition string `yaml:"condition"`
}

// stringList is a Compose command or entrypoint: a list, or a string split
// on spaces.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = strings.Fields(n.Value)
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// flag returns the value of --name in args ("--name v" or "--name=v").
func (l stringList) flag(name string) (string, bool) {
	for i, a := range l {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(l) {
			return l[i+1], true
		}
	}
	return "", false
}

// composeServiceKeys are the service attributes of the Compose
// specification; a key outside it is a typo Compose would reject.
var composeServiceKeys = strings.Fields(`annotations attach blkio_config build
	cap_add cap_drop cgroup cgroup_parent command configs container_name
	cpu_count cpu_percent cpu_period cpu_quota cpu_rt_period cpu_rt_runtime
	cpu_shares cpus cpuset credential_spec depends_on deploy develop
	device_cgroup_rules devices dns dns_opt dns_search domainname driver_opts
	entrypoint env_file environment expose extends external_links extra_hosts
	gpus group_add healthcheck hostname image init ipc isolation label_file
	labels links logging mac_address mem_limit mem_reservation mem_swappiness
	memswap_limit models network_mode networks oom_kill_disable oom_score_adj
	pid pids_limit platform ports post_start pre_stop privileged profiles
	provider pull_policy read_only restart runtime scale secrets security_opt
	shm_size stdin_open stop_grace_period stop_signal storage_opt sysctls tmpfs
	tty ulimits use_api_socket user userns_mode uts volumes volumes_from
	working_dir`)

func loadCompose(t *testing.T) composeSpec {
	t.Helper()
	var c composeSpec
	decodeYAML(t, composeFile, &c)
	if len(c.Services) == 0 {
		t.Fatalf("%s: no services", composeFile)
	}
	return c
}

// service returns the named service or stops the test.
func (c composeSpec) service(t *testing.T, name string) composeService {
	t.Helper()
	s, ok := c.Services[name]
	if !ok {
		t.Fatalf("%s: no service %q", composeFile, name)
	}
	return s
}

// oneShot reports whether s runs to completion (restart "no").
func (s composeService) oneShot() bool { return s.Restart == "no" }

// containerPorts returns the container ports that s publishes.
func (s composeService) containerPorts(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range s.Ports {
		p, _, _ = strings.Cut(p, "/")
		parts := strings.Split(p, ":")
		c := parts[len(parts)-1]
		if _, err := strconv.Atoi(c); err != nil {
			t.Errorf("%s: port %q: container port %q is not a number", composeFile, p, c)
		}
		out = append(out, c)
	}
	return out
}

// mount is one short-syntax volume of a service.
type mount struct {
	source, target string
	bind           bool // source is a path of the repository
}

func (s composeService) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("%s: volume %q: want SOURCE:TARGET[:MODE]", composeFile, v)
			continue
		}
		m := mount{source: parts[0], target: parts[1]}
		m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/")
		out = append(out, m)
	}
	return out
}

// bindSource returns the repository path mounted at target in s, if any.
func (s composeService) bindSource(t *testing.T, target string) (string, bool) {
	t.Helper()
	for _, m := range s.mounts(t) {
		if m.bind && m.target == target {
			return path.Clean(m.source), true
		}
	}
	return "", false
}

// containerFile maps a file path inside a service's container to the
// repository file bind-mounted there (the mount itself or a parent
// directory), if any.
func (s composeService) containerFile(t *testing.T, file string) (string, bool) {
	t.Helper()
	for _, m := range s.mounts(t) {
		if !m.bind {
			continue
		}
		if file == m.target {
			return path.Clean(m.source), true
		}
		if rest, ok := strings.CutPrefix(file, strings.TrimSuffix(m.target, "/")+"/"); ok {
			return path.Join(m.source, rest), true
		}
	}
	return "", false
}

// TestComposeServiceKeys: every service attribute is a Compose attribute
// (or an x- extension).
func TestComposeServiceKeys(t *testing.T) {
	var raw struct {
		Services map[string]map[string]yaml.Node `yaml:"services"`
	}
	decodeYAML(t, composeFile, &raw)
	for name, attrs := range raw.Services {
		for k := range attrs {
			if !slices.Contains(composeServiceKeys, k) && !strings.HasPrefix(k, "x-") {
				t.Errorf("%s: service %s: unknown attribute %q", composeFile, name, k)
			}
		}
	}
}

// TestComposeFilesExist: every file or directory that a build or a bind
// mount refers to exists; named volumes are declared and used; absolute
// container paths in the environment point into a mounted file that exists.
func TestComposeFilesExist(t *testing.T) {
	c := loadCompose(t)
	used := map[string]bool{}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s: neither image nor build", name)
		}
		if b := s.Build; b != nil {
			if b.Context == "" || b.Dockerfile == "" {
				t.Errorf("service %s: build needs context and dockerfile", name)
			}
			if !exists(t, b.Context) {
				t.Errorf("service %s: build context %s does not exist", name, b.Context)
			}
			if df := path.Join(b.Context, b.Dockerfile); !exists(t, df) {
				t.Errorf("service %s: Dockerfile %s does not exist", name, df)
			} else if df != dockerfile {
				t.Errorf("service %s: builds %s, want %s", name, df, dockerfile)
			}
			if s.Image == "" {
				t.Errorf("service %s: a built service needs an image name (shared with k8s)", name)
			}
		}
		for _, m := range s.mounts(t) {
			switch {
			case !m.bind:
				used[m.source] = true
				if _, ok := c.Volumes[m.source]; !ok {
					t.Errorf("service %s: volume %s is not declared under volumes", name, m.source)
				}
			case strings.HasPrefix(m.source, "/"):
				t.Errorf("service %s: bind mount %s: use a path relative to the repository", name, m.source)
			case !exists(t, m.source):
				t.Errorf("service %s: bind mount source %s does not exist", name, m.source)
			}
			if !strings.HasPrefix(m.target, "/") {
				t.Errorf("service %s: mount target %q is not absolute", name, m.target)
			}
		}
		for k, v := range s.Environment {
			if !strings.HasPrefix(v, "/") {
				continue
			}
			if src, ok := s.containerFile(t, v); ok && !exists(t, src) {
				t.Errorf("service %s: %s=%s is %s in the repository, which does not exist", name, k, v, src)
			}
		}
	}
	for v := range c.Volumes {
		if !used[v] {
			t.Errorf("volume %s is declared but no service mounts it", v)
		}
	}
}

// TestComposeHealthAndDependencies: every long-running service has a health
// check (so `docker compose up --wait` waits for it); a one-shot service is
// awaited with service_completed_successfully; every depends_on target
// exists and has what its condition needs.
func TestComposeHealthAndDependencies(t *testing.T) {
	c := loadCompose(t)
	awaited := map[string]bool{}
	for name, s := range c.Services {
		hc := s.Healthcheck
		switch {
		case s.oneShot():
			if hc != nil && !hc.Disable {
				t.Errorf("service %s: a one-shot service needs no health check", name)
			}
		case len(s.Profiles) > 0:
			// Optional services (e.g. the load producer) are not part of
			// the default `up --wait`.
		case hc == nil || hc.Disable || len(hc.Test) < 2:
			t.Errorf("service %s: long-running service without a health check", name)
		case hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL":
			t.Errorf("service %s: health check test must start with CMD or CMD-SHELL, got %q", name, hc.Test[0])
		}
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			if !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
				continue
			}
			if len(target.Profiles) > 0 && !slices.Equal(target.Profiles, s.Profiles) {
				t.Errorf("service %s depends on %s, which only runs with profiles %v", name, dep, target.Profiles)
			}
			switch d.Condition {
			case "service_healthy":
				if target.Healthcheck == nil || target.Healthcheck.Disable {
					t.Errorf("service %s waits for %s to be healthy, which has no health check", name, dep)
				}
			case "service_completed_successfully":
				if !target.oneShot() {
					t.Errorf("service %s waits for %s to complete, which is not a one-shot (restart: \"no\")", name, dep)
				}
				awaited[dep] = true
			case "service_started", "":
			default:
				t.Errorf("service %s: depends_on %s: unknown condition %q", name, dep, d.Condition)
			}
		}
	}
	for name, s := range c.Services {
		if s.oneShot() && !awaited[name] {
			t.Errorf("one-shot service %s: no service waits for it with service_completed_successfully", name)
		}
	}
}

// listeners parses a Kafka listener list ("NAME://host:port,...").
func listeners(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for l := range strings.SplitSeq(s, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(l), "://")
		if !ok {
			t.Fatalf("listener %q: want NAME://host:port", l)
		}
		out[name] = addr
	}
	return out
}

// kafkaAddress returns the address that Kafka advertises to clients inside
// the compose network (its inter-broker listener).
func kafkaAddress(t *testing.T, c composeSpec) string {
	t.Helper()
	env := c.service(t, "kafka").Environment
	inter := env["KAFKA_INTER_BROKER_LISTENER_NAME"]
	if inter == "" {
		inter = "PLAINTEXT"
	}
	adv := listeners(t, env["KAFKA_ADVERTISED_LISTENERS"])
	addr, ok := adv[inter]
	if !ok {
		t.Fatalf("kafka: no advertised listener %s", inter)
	}
	return addr
}

// TestComposeKafka: single-node KRaft with auto topic creation off, every
// advertised and published port a listener, and kafka-init creating
// exactly the topics of the rankd config plus its dead-letter topic.
func TestComposeKafka(t *testing.T) {
	c := loadCompose(t)
	kafka := c.service(t, "kafka")
	env := kafka.Environment
	for k, want := range map[string]string{
		"KAFKA_PROCESS_ROLES":                    "broker,controller",
		"KAFKA_AUTO_CREATE_TOPICS_ENABLE":        "false",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
		"KAFKA_CONTROLLER_LISTENER_NAMES":        "CONTROLLER",
	} {
		if env[k] != want {
			t.Errorf("kafka: %s = %q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"CLUSTER_ID", "KAFKA_NODE_ID", "KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"} {
		if env[k] == "" {
			t.Errorf("kafka: %s is not set", k)
		}
	}
	ls := listeners(t, env["KAFKA_LISTENERS"])
	listenPorts := map[string]string{}
	for name, addr := range ls {
		listenPorts[port(t, addr)] = name
	}
	protocols := map[string]bool{}
	for p := range strings.SplitSeq(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ",") {
		name, _, _ := strings.Cut(p, ":")
		protocols[name] = true
	}
	for name := range ls {
		if !protocols[name] {
			t.Errorf("kafka: listener %s has no security protocol", name)
		}
	}
	for name, addr := range listeners(t, env["KAFKA_ADVERTISED_LISTENERS"]) {
		if l, ok := ls[name]; !ok || port(t, l) != port(t, addr) {
			t.Errorf("kafka: advertised %s://%s has no listener on its port", name, addr)
		}
	}
	for _, p := range kafka.containerPorts(t) {
		if _, ok := listenPorts[p]; !ok {
			t.Errorf("kafka: published port %s is no listener", p)
		}
	}
	internal := kafkaAddress(t, c)
	if host, _, _ := strings.Cut(internal, ":"); host != "kafka" {
		t.Errorf("kafka: advertises %s to the compose network, want the service name kafka", internal)
	}
	if kafka.Healthcheck == nil {
		t.Fatalf("kafka: no health check")
	}
	if hc := strings.Join(kafka.Healthcheck.Test, " "); !strings.Contains(hc, "/opt/kafka/bin/kafka-broker-api-versions.sh") {
		t.Errorf("kafka: health check %q does not use kafka-broker-api-versions.sh", hc)
	}

	init := c.service(t, "kafka-init")
	if init.Image != kafka.Image {
		t.Errorf("kafka-init: image %s, want the kafka image %s", init.Image, kafka.Image)
	}
	if d, ok := init.DependsOn["kafka"]; !ok || d.Condition != "service_healthy" {
		t.Errorf("kafka-init: must depend on kafka with condition service_healthy")
	}
	if got := init.Environment["BOOTSTRAP"]; got != internal {
		t.Errorf("kafka-init: BOOTSTRAP = %q, want %q", got, internal)
	}
	script := strings.Join(append(append(stringList{}, init.Entrypoint...), init.Command...), " ")
	for _, want := range []string{"kafka-topics.sh", "--create", "--if-not-exists", "$$TOPICS", "$$BOOTSTRAP", "--partitions", "--replication-factor 1"} {
		if !strings.Contains(script, want) {
			t.Errorf("kafka-init: the script does not contain %q", want)
		}
	}
	created := map[string]int{}
	for spec := range strings.FieldsSeq(init.Environment["TOPICS"]) {
		topic, n, ok := strings.Cut(spec, ":")
		p, err := strconv.Atoi(n)
		if !ok || err != nil || p < 1 {
			t.Errorf("kafka-init: TOPICS entry %q: want topic:partitions", spec)
			continue
		}
		created[topic] = p
	}
	cfg := loadStackConfig(t)
	want := append(slices.Clone(cfg.Kafka.Topics), cfg.Kafka.DeadLetterTopic)
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(created)); !slices.Equal(got, want) {
		t.Errorf("kafka-init creates topics %v; %s needs %v (kafka.topics + dead_letter_topic)", got, stackConfig, want)
	}
	for _, topic := range cfg.Kafka.Topics {
		if created[topic] > 0 && created[topic] < cfg.Kafka.Workers {
			t.Errorf("kafka-init: topic %s has %d partitions, fewer than the %d workers", topic, created[topic], cfg.Kafka.Workers)
		}
	}
}

// TestComposeRankd: rankd and the producer reach Kafka and Redis at the
// addresses those services serve, publish and probe the config's HTTP
// port, and read the config file at the path the image uses.
func TestComposeRankd(t *testing.T) {
	c := loadCompose(t)
	cfg := loadStackConfig(t)
	df := parseDockerfile(t)
	if len(df.final().entrypoint) != 1 {
		t.Fatalf("%s: ENTRYPOINT %v, want the binary alone", dockerfile, df.final().entrypoint)
	}
	rankd := c.service(t, "rankd")
	internal := kafkaAddress(t, c)
	env := knownEnv(t)

	if rankd.Build == nil {
		t.Fatalf("rankd: not built from %s", dockerfile)
	}
	for k := range rankd.Environment {
		if !env[k] {
			t.Errorf("rankd: environment %s is not a variable rankd reads", k)
		}
	}
	if got := rankd.Environment["RANKD_KAFKA_BROKERS"]; got != internal || got != strings.Join(cfg.Kafka.Brokers, ",") {
		t.Errorf("rankd: RANKD_KAFKA_BROKERS = %q, want the kafka listener %q = kafka.brokers of %s %v", got, internal, stackConfig, cfg.Kafka.Brokers)
	}
	redisAddr := rankd.Environment["RANKD_REDIS_ADDR"]
	if redisAddr != cfg.Redis.Addr {
		t.Errorf("rankd: RANKD_REDIS_ADDR = %q, want redis.addr of %s %q", redisAddr, stackConfig, cfg.Redis.Addr)
	}
	if host, p, _ := strings.Cut(redisAddr, ":"); host != "redis" || p != "6379" {
		t.Errorf("rankd: RANKD_REDIS_ADDR = %q, want the redis service on its default port (redis:6379)", redisAddr)
	}
	if _, ok := c.Services["redis"]; !ok {
		t.Errorf("no redis service")
	}
	for _, dep := range []string{"kafka-init", "redis"} {
		if _, ok := rankd.DependsOn[dep]; !ok {
			t.Errorf("rankd: does not depend on %s", dep)
		}
	}

	listen := port(t, cfg.HTTP.Listen)
	if ports := rankd.containerPorts(t); !slices.Contains(ports, listen) {
		t.Errorf("rankd: publishes container ports %v, want the http.listen port %s of %s", ports, listen, stackConfig)
	}
	if !slices.Contains(df.final().expose, listen) {
		t.Errorf("%s: EXPOSE %v, want the http.listen port %s", dockerfile, df.final().expose, listen)
	}

	if rankd.Healthcheck == nil || len(rankd.Healthcheck.Test) < 2 {
		t.Fatalf("rankd: no health check")
	}
	hc := stringList(rankd.Healthcheck.Test[1:])
	if len(hc) < 2 || hc[0] != df.final().entrypoint[0] || hc[1] != "healthcheck" {
		t.Errorf("rankd: health check %v, want [%s healthcheck --url ...] (distroless has no shell or curl)", hc, df.final().entrypoint[0])
	}
	if u, ok := hc.flag("url"); !ok {
		t.Errorf("rankd: health check without --url")
	} else if want := fmt.Sprintf("http://127.0.0.1:%s/readyz", listen); u != want && u != strings.Replace(want, "readyz", "healthz", 1) {
		t.Errorf("rankd: health check URL %s, want %s", u, want)
	}

	cfgPath, ok := stringList(df.final().cmd).flag("config")
	if !ok {
		t.Fatalf("%s: CMD has no --config", dockerfile)
	}
	if src, ok := rankd.bindSource(t, cfgPath); !ok || src != stackConfig {
		t.Errorf("rankd: mounts %q at %s, want %s (edit it and restart rankd, no rebuild)", src, cfgPath, stackConfig)
	}
	if len(rankd.Command) > 0 {
		if p, ok := rankd.Command.flag("config"); ok && p != cfgPath {
			t.Errorf("rankd: command reads config %s, the image has it at %s", p, cfgPath)
		}
	}

	prod, ok := c.Services["producer"]
	if !ok {
		return
	}
	if prod.Image != rankd.Image {
		t.Errorf("producer: image %s, want rankd's %s", prod.Image, rankd.Image)
	}
	if len(prod.Command) == 0 || prod.Command[0] != "produce" {
		t.Errorf("producer: command %v, want [produce ...]", prod.Command)
	}
	if b, _ := prod.Command.flag("brokers"); b != internal {
		t.Errorf("producer: --brokers %q, want %q", b, internal)
	}
	if _, ok := prod.DependsOn["kafka-init"]; !ok {
		t.Errorf("producer: does not wait for kafka-init")
	}
}
