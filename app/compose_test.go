package app

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// envRef is a ${NAME} or ${NAME:-default} reference.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// readEnv returns the variables a YAML file's values read: ${NAME} in
// scalars, not in comments.
func readEnv(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	names := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			for _, m := range envRef.FindAllStringSubmatch(n.Value, -1) {
				names[m[1]] = true
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return names
}

// TestComposeFile: docker compose up must not clash with a developer's
// own Redis and Postgres (no host port for them), and every variable the
// compose file tells you to set, or sets for venn, is one venn's config
// reads.
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"redis", "postgres"} {
		s, ok := compose.Services[name]
		if !ok {
			t.Errorf("docker-compose.yml has no %s service", name)
			continue
		}
		if len(s.Ports) > 0 {
			t.Errorf("%s publishes %v on the host: it clashes with a server of the developer's own", name, s.Ports)
		}
	}
	venn, ok := compose.Services["venn"]
	if !ok {
		t.Fatal("docker-compose.yml has no venn service")
	}
	if !slices.Contains(venn.Ports, "8545:8545") {
		t.Errorf("venn publishes %v, want 8545:8545 among them", venn.Ports)
	}

	// What the file names: venn's environment, and the variables its
	// comments tell you to set.
	named := map[string]bool{}
	for k := range venn.Environment {
		named[k] = true
	}
	varName := regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b`)
	for _, line := range strings.Split(string(data), "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
			for _, v := range varName.FindAllString(c, -1) {
				named[v] = true
			}
		}
	}
	reads := readEnv(t, "../config.example.yaml")
	if len(reads) == 0 {
		t.Fatal("config.example.yaml reads no variable: the test cannot judge")
	}
	for v := range named {
		if !reads[v] {
			t.Errorf("docker-compose.yml names %s, which config.example.yaml does not read (it reads %v)", v, keys(reads))
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
