package deploy

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

// prometheusOwn are series Prometheus makes itself, which rules may use.
var prometheusOwn = map[string]bool{"up": true}

// chainless are the prefixes of venn's metrics that have no chain label
// (the history store, the admin API, the request log): a panel's query of
// one need not filter by the chain variable.
var chainless = []string{"venn_blockstore_", "venn_admin_", "venn_request_log_"}

// grafanaVars stand in for the dashboard's variables so its queries parse.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// metricNames returns the metric names expr's selectors name (see
// selectorNames); it must name one.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	names, err := selectorNames(grafanaVars.Replace(expr))
	if err != nil {
		t.Errorf("%s: %v", expr, err)
	}
	if len(names) == 0 {
		t.Errorf("%s: names no metric", expr)
	}
	return names
}

// check says whether venn exports name: a family it describes, or a
// histogram's _bucket, _sum or _count series.
func (x *exported) check(name string) (ok bool, why string) {
	if x.names[name] || prometheusOwn[name] {
		return true, ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if !found || !x.names[base] {
			continue
		}
		if x.types[base] != dto.MetricType_HISTOGRAM {
			return false, base + " is not a histogram (add it to histograms if it is one)"
		}
		return true, ""
	}
	return false, "venn exports no such metric"
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardExprs returns every panel's queries by panel title, and the
// template variables' label_values queries.
func dashboardExprs(t *testing.T) (panels map[string][]string, vars []string) {
	t.Helper()
	data, err := os.ReadFile("grafana/dashboards/venn.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("venn.json: %v", err)
	}
	panels = map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if _, dup := panels[p.Title]; dup {
			t.Errorf("two panels titled %q", p.Title)
		}
		panels[p.Title] = nil
		for _, tg := range p.Targets {
			panels[p.Title] = append(panels[p.Title], tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		inner, ok := strings.CutPrefix(s, "label_values(")
		if !ok {
			t.Errorf("variable %s: query %q, want label_values(SELECTOR, LABEL)", v.Name, s)
			continue
		}
		i := strings.LastIndex(inner, ",")
		if i < 0 {
			t.Errorf("variable %s: query %q, want label_values(SELECTOR, LABEL)", v.Name, s)
			continue
		}
		vars = append(vars, inner[:i])
	}
	return panels, vars
}

// rulesFile is the part of a Prometheus rules file the test reads.
type rulesFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func ruleExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f rulesFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// TestAgainstRunningVenn holds the pack to a venn running in-process:
// the queries name what it exports, the probes ask what it serves.
func TestAgainstRunningVenn(t *testing.T) {
	x := startVenn(t)
	t.Run("queries", func(t *testing.T) { checkQueries(t, x) })
	t.Run("probes", func(t *testing.T) { checkProbes(t, x) })
	t.Run("admin", func(t *testing.T) { checkAdmin(t, x) })
}

// checkAdmin: the admin API and status page the README sends operators to
// answer on admin_listen, the API with the token only.
func checkAdmin(t *testing.T, x *exported) {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for _, tt := range []struct {
		path, token string
		want        int
	}{
		{"/admin/status", adminToken, http.StatusOK},
		{"/admin/status", "", http.StatusUnauthorized},
		{"/status", "", http.StatusUnauthorized}, // the sign-in page
	} {
		if got := statusWith(client, "http://"+x.adminAddr+tt.path, tt.token); got != tt.want {
			t.Errorf("GET %s (token %v): %d, want %d", tt.path, tt.token != "", got, tt.want)
		}
	}
}

// checkQueries: every query of the dashboard and the alert rules names
// only metrics venn exports; the dashboard covers what the issue asks for.
func checkQueries(t *testing.T, x *exported) {
	if len(x.names) < 60 {
		t.Fatalf("venn describes %d metric families: the registry read is broken", len(x.names))
	}
	used := map[string]bool{}
	use := func(where, expr string) {
		for _, name := range metricNames(t, expr) {
			if ok, why := x.check(name); !ok {
				t.Errorf("%s: %s: %s", where, name, why)
			}
			used[strings.TrimSuffix(name, "_bucket")] = true
		}
	}

	panels, vars := dashboardExprs(t)
	if len(panels) < 25 {
		t.Errorf("the dashboard has %d panels, want at least 25", len(panels))
	}
	for title, exprs := range panels {
		if len(exprs) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, e := range exprs {
			if !strings.Contains(e, `chain=~"$chain"`) && !slices.ContainsFunc(chainless, func(p string) bool { return strings.Contains(e, p) }) {
				t.Errorf("panel %q: %s is not filtered by the chain variable", title, e)
			}
			use("panel "+title, e)
		}
	}
	for _, v := range vars {
		use("template variable", v)
	}
	for _, want := range []string{
		"venn_requests_total", "venn_answers_total", "venn_remote_errors_total", "venn_remote_failures_total",
		"venn_remote_call_duration_seconds", "venn_remote_lag_blocks", "venn_remote_score", "venn_remote_breaker_state",
		"venn_head_age_seconds", "venn_leader_changes_total", "venn_reorgs_total", "venn_subscriptions",
		"venn_subscription_dispatch_seconds", "venn_archive_height", "venn_remote_cordoned",
		"venn_cache_requests_total", "venn_cache_bytes", "venn_cache_evictions_total", "venn_cache_store_errors_total",
		"venn_admin_actions_total", "venn_request_log_dropped_total",
	} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}

	rules := ruleExprs(t, "prometheus/venn-rules.yml")
	if len(rules) < 9 {
		t.Errorf("%d alert rules, want at least 9", len(rules))
	}
	for alert, e := range rules {
		use("alert "+alert, e)
	}
	alerts := make([]string, 0, len(rules))
	for a := range rules {
		alerts = append(alerts, a)
	}
	slices.Sort(alerts)
	t.Logf("%d panels and %d alerts (%v) checked against %d exported families", len(panels), len(rules), alerts, len(x.names))
}

// checkProbes: the paths the compose health check, the balancer and the
// Kubernetes probes ask answer 200 on a ready venn's metrics listener.
func checkProbes(t *testing.T, x *exported) {
	m := loadManifests(t)
	c := m.container(t)
	paths := map[string]string{
		"kubernetes readiness": c.ReadinessProbe.HTTPGet.Path,
		"kubernetes liveness":  c.LivenessProbe.HTTPGet.Path,
		"haproxy check":        "/readyz",  // checkBalancer holds haproxy.cfg to it
		"haproxy admin check":  "/healthz", // and to this
	}
	p := loadCompose(t)
	for _, name := range vennReplicas {
		test := p.Services[name].HealthCheck.Test
		u, err := url.Parse(test[len(test)-1])
		if err != nil {
			t.Fatal(err)
		}
		paths[name+" health check"] = u.Path
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for who, path := range paths {
		if got := status(client, "http://"+x.metricsAddr+path); got != http.StatusOK {
			t.Errorf("%s asks %s: venn answers %d, want 200", who, path, got)
		}
	}
}
