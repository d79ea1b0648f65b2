package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsWithExamples are the documents whose YAML examples venn
// check-config must accept: the edge's, the tenants' (JWT, scopes,
// budgets, usage, stored tenants), the remotes' (shadow remotes,
// transaction routes) and the README's.
var docsWithExamples = []string{"README.md", "docs/edge.md", "docs/tenants.md", "docs/remotes.md"}

// docsBaseChain completes an example that configures no chain: one named
// eth, which the examples' tenants and keys name.
const docsBaseChain = "\nchains:\n  - name: eth\n    chain_id: 1\n    remotes:\n      - {name: a, url: \"http://127.0.0.1:1\"}\n"

var (
	yamlBlockRE = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	envRefRE    = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`) // without a default
)

// Every YAML example of the documents is a file venn check-config
// accepts (what app.Load does), as written: an example of sections
// other than chains is completed with a chain named eth; the variables it
// names are set; the files it names (jwt-public.pem) exist beside it.
func TestDocsConfigExamplesPassCheckConfig(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	writeDocsPublicKey(t, filepath.Join(dir, "jwt-public.pem"))
	t.Chdir(dir)
	n := 0
	for _, doc := range docsWithExamples {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlockRE.FindAllStringSubmatchIndex(string(text), -1) {
			block := string(text[m[2]:m[3]])
			line := 1 + strings.Count(string(text[:m[2]]), "\n")
			if !regexp.MustCompile(`(?m)^chains:`).MatchString(block) {
				block += docsBaseChain
			}
			for _, v := range envRefRE.FindAllStringSubmatch(block, -1) {
				t.Setenv(v[1], "docs-example-0123456789")
			}
			file := filepath.Join(dir, fmt.Sprintf("example-%d.yaml", i))
			if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
				t.Fatal(err)
			}
			n++
			if _, err := Load(file); err != nil {
				t.Errorf("%s, the example at line %d: venn check-config refuses it:\n%v\n--- example ---\n%s", doc, line, err, block)
			}
		}
	}
	if n < 8 {
		t.Errorf("found %d YAML examples, want the documents' (8 or more)", n)
	}
}

// repoRoot is the repository's top folder: the tests run in app/.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

func writeDocsPublicKey(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
