package natstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// envCLI names the variable that gives the nats CLI's path.
const envCLI = "VENN_NATS_CLI"

// CLIVersion is the natscli release the tests drive, as scripts/test.sh
// builds it.
const CLIVersion = "v0.5.0"

// CLI returns the path of the nats CLI (natscli): $VENN_NATS_CLI, else
// ~/.cache/venn-conformance/bin/nats (where scripts/test.sh builds it),
// else nats on the PATH. A missing CLI fails the test rather than
// skipping it.
func CLI(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(envCLI); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "venn-conformance", "bin", "nats")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	t.Fatalf("the nats CLI is missing: run scripts/test.sh (it builds it), or go install github.com/nats-io/natscli/nats@%s, or set %s", CLIVersion, envCLI)
	return ""
}
