package deploy

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/app"
)

// envRef is a ${NAME} or ${NAME:-default} reference.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// vennReplicas are the compose file's venn services.
var vennReplicas = []string{"venn-1", "venn-2", "venn-3"}

// adminPort is where the compose replicas serve the admin API and the
// balancer publishes it.
const adminPort = "9546"

// envRefs returns the variables text's lines read, comments left out.
func envRefs(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range envRef.FindAllStringSubmatch(line, -1) {
			refs[m[1]] = true
		}
	}
	return refs
}

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: types.Mapping{}, // the defaults, as on a machine with no .env
	}, func(o *loader.Options) { o.SetProjectName("venn", true); o.ResolvePaths = true })
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

// TestCompose: the compose cluster is three venn replicas behind one
// port with Redis, Postgres, Prometheus and Grafana; every service has an
// image and a health check; nothing publishes 6379 or 5432; every file it
// mounts is in the repository; the venn config passes venn's validation
// with the environment compose gives it, and listens where the balancer,
// Prometheus and the health check look; the admin API takes a token and
// reaches the host's loopback only.
func TestCompose(t *testing.T) {
	p := loadCompose(t)
	wantPorts := map[string][]string{"lb": {"8545", adminPort}, "prometheus": {"9090"}, "grafana": {"3000"}}
	for _, name := range append(slices.Clone(vennReplicas), "lb", "redis", "postgres", "prometheus", "grafana") {
		s, ok := p.Services[name]
		if !ok {
			t.Errorf("no %s service", name)
			continue
		}
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Test[0] != "CMD" {
			t.Errorf("%s: health check %+v, want a CMD test", name, s.HealthCheck)
		}
		var published []string
		for _, port := range s.Ports {
			published = append(published, port.Published)
		}
		if !slices.Equal(published, wantPorts[name]) {
			t.Errorf("%s publishes %v on the host, want %v", name, published, wantPorts[name])
		}
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts %s, which is not in the repository: %v", name, v.Source, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s writable, want :ro", name, v.Source)
			}
		}
	}
	for _, s := range p.Services {
		for _, port := range s.Ports {
			if port.Published == "6379" || port.Published == "5432" {
				t.Errorf("%s publishes %s: it clashes with a developer's own Redis or Postgres", s.Name, port.Published)
			}
			if port.Published == adminPort && port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes the admin API on %q, want the host's loopback only (127.0.0.1)", s.Name, port.HostIP)
			}
		}
	}
	for _, name := range vennReplicas {
		checkReplica(t, p.Services[name])
	}
	checkBalancer(t)
	checkScrape(t, "prometheus/prometheus.yml", vennReplicas)
	checkComposeEnv(t, p)
}

// checkReplica validates the config a venn replica mounts, with its
// environment, and its health check's address.
func checkReplica(t *testing.T, s types.ServiceConfig) {
	t.Helper()
	if s.Build == nil || s.Build.Context == "" {
		t.Errorf("%s: not built from the repository", s.Name)
	}
	i := slices.Index(s.Command, "--config")
	if i < 0 || i+1 >= len(s.Command) {
		t.Fatalf("%s: command %v has no --config", s.Name, s.Command)
	}
	var source string
	for _, v := range s.Volumes {
		if v.Target == s.Command[i+1] {
			source = v.Source
		}
	}
	if source == "" {
		t.Fatalf("%s: --config %s is not mounted", s.Name, s.Command[i+1])
	}
	for k, v := range s.Environment {
		if v == nil {
			t.Errorf("%s: %s has no value", s.Name, k)
			continue
		}
		t.Setenv(k, *v)
	}
	cfg, err := app.Load(source)
	if err != nil {
		t.Fatalf("%s: %s does not pass venn check-config:\n%v", s.Name, source, err)
	}
	if got := port(cfg.Listen); got != "8545" {
		t.Errorf("%s listens on %s, want 8545 (the balancer's backend port)", s.Name, cfg.Listen)
	}
	if got := port(*cfg.MetricsListen); got != "9545" {
		t.Errorf("%s serves metrics on %s, want 9545", s.Name, *cfg.MetricsListen)
	}
	if cfg.Redis.URL == "" || cfg.Postgres.URL == "" {
		t.Errorf("%s: a replica without Redis or Postgres is not a cluster", s.Name)
	}
	if got := port(cfg.AdminListen); got != adminPort || len(cfg.Admin.Tokens) == 0 {
		t.Errorf("%s serves the admin API on %q with %d tokens, want :%s with a token (the balancer's admin backend)",
			s.Name, cfg.AdminListen, len(cfg.Admin.Tokens), adminPort)
	}
	test := s.HealthCheck.Test
	if len(test) != 4 || test[1] != "/venn" || test[2] != "probe" {
		t.Fatalf("%s: health check %v, want /venn probe URL", s.Name, test)
	}
	u, err := url.Parse(test[3])
	if err != nil || u.Port() != "9545" || u.Path != "/healthz" {
		t.Errorf("%s: health check asks %s, want the metrics listener's /healthz", s.Name, test[3])
	}
	if grace := cfg.ShutdownDelay + cfg.ShutdownTimeout; s.StopGracePeriod == nil || *s.StopGracePeriod <= types.Duration(grace) {
		t.Errorf("%s: stop_grace_period %v, want more than shutdown_delay + shutdown_timeout (%v)", s.Name, s.StopGracePeriod, grace)
	}
}

// checkBalancer: haproxy sends calls to every replica's JSON-RPC port and
// checks each one's /readyz on its metrics port; it sends the admin port
// to one replica at a time, checked by /healthz (a draining replica still
// answers its admin API).
func checkBalancer(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(data)
	for _, want := range []string{"bind :8545", "option httpchk GET /readyz", "check port 9545", "monitor-uri /healthz",
		"bind :" + adminPort, "balance first", "option httpchk GET /healthz"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}
	for _, r := range vennReplicas {
		for _, port := range []string{"8545", adminPort} {
			if !strings.Contains(cfg, "server "+r+" "+r+":"+port) {
				t.Errorf("haproxy.cfg does not balance to %s:%s", r, port)
			}
		}
	}
}

// checkScrape: Prometheus scrapes every replica's metrics listener and
// loads the rules.
func checkScrape(t *testing.T, path string, replicas []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !slices.Contains(cfg.RuleFiles, "/etc/prometheus/venn-rules.yml") {
		t.Errorf("%s loads rules %v, want /etc/prometheus/venn-rules.yml", path, cfg.RuleFiles)
	}
	var targets []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for _, r := range replicas {
		if !slices.Contains(targets, r+":9545") {
			t.Errorf("%s does not scrape %s:9545 (targets %v)", path, r, targets)
		}
	}
}

// checkComposeEnv: every ${VAR} the compose file reads reaches venn's
// config, and every variable it gives venn is one the config reads.
func checkComposeEnv(t *testing.T, p *types.Project) {
	t.Helper()
	reads := envRefs(t, "venn/venn.yaml")
	given := map[string]string{} // ${VAR} in a value -> the env key it sets
	for k := range p.Services[vennReplicas[0]].Environment {
		if !reads[k] {
			t.Errorf("compose gives venn %s, which venn/venn.yaml does not read", k)
		}
	}
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XVenn struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"x-venn"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range doc.XVenn.Environment {
		for _, m := range envRef.FindAllStringSubmatch(v, -1) {
			given[m[1]] = k
		}
	}
	refs := envRefs(t, "../docker-compose.yml")
	if len(refs) == 0 {
		t.Fatal("docker-compose.yml reads no variable: the test cannot judge")
	}
	for v := range refs {
		if k, ok := given[v]; !ok || !reads[k] {
			t.Errorf("docker-compose.yml reads ${%s}, which does not reach venn's config", v)
		}
	}
}

// port is addr's port.
func port(addr string) string {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return ""
	}
	return addr[i+1:]
}
