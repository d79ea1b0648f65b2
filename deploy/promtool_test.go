package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// promtoolPackage is the Debian package that ships promtool.
const promtoolPackage = "prometheus"

// promtool finds promtool, installing Debian's prometheus package when
// it is missing and the test runs as root where apt works; otherwise the
// test is skipped, naming the package.
func promtool(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("promtool"); err == nil {
		return path
	}
	if _, err := exec.LookPath("apt-get"); err == nil && os.Geteuid() == 0 {
		cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", promtoolPackage)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if path, lerr := exec.LookPath("promtool"); lerr == nil {
			return path
		}
		t.Logf("apt-get install -y %s: %v\n%s", promtoolPackage, err, tail(out))
	}
	t.Skipf("promtool is not installed and could not be installed here: apt-get install -y %s (Debian's package ships it)", promtoolPackage)
	return ""
}

func tail(b []byte) string {
	s := string(b)
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

func runPromtool(t *testing.T, bin, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// ruleTests is the part of a promtool test file the test reads.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestPromtool: the rules pass promtool check rules and their unit tests,
// in which every alert is seen both quiet and firing; the scrape config
// passes promtool check config; every dashboard query parses.
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	runPromtool(t, bin, "prometheus", "check", "rules", "venn-rules.yml")
	runPromtool(t, bin, "prometheus", "test", "rules", "venn-rules.test.yml")

	data, err := os.ReadFile("prometheus/venn-rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(data, &rt); err != nil {
		t.Fatal(err)
	}
	quiet, firing := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) == 0 {
				quiet[a.Alertname] = true
			} else {
				firing[a.Alertname] = true
			}
		}
	}
	for alert := range ruleExprs(t, "prometheus/venn-rules.yml") {
		if !quiet[alert] || !firing[alert] {
			t.Errorf("%s: the unit tests see it quiet %v, firing %v; want both", alert, quiet[alert], firing[alert])
		}
	}

	// The scrape config, with its rules where the container mounts them
	// pointed at the repository's.
	dir := t.TempDir()
	cfg, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs("prometheus/venn-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.ReplaceAll(string(cfg), "/etc/prometheus/venn-rules.yml", rules))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "config", "prometheus.yml")

	// Every dashboard query, as a recording rule promtool parses.
	panels, vars := dashboardExprs(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	add := func(expr string) {
		n++
		q, _ := yaml.Marshal(grafanaVars.Replace(strings.ReplaceAll(expr, "$chain", "x")))
		fmt.Fprintf(&b, "      - record: venn:dashboard_query_%d\n        expr: %s", n, q)
	}
	for _, exprs := range panels {
		for _, e := range exprs {
			add(e)
		}
	}
	for _, v := range vars {
		add(v)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "rules", "dashboard.yml")
}
