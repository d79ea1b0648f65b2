package tracing

import (
	"os/exec"
	"strings"
	"testing"
)

// TestComponentsImportOnlyTheAPI: the packages that make spans link
// OpenTelemetry's API alone; the SDK, the OTLP exporters and gRPC come in
// through tracing/otlp, which only app imports.
func TestComponentsImportOnlyTheAPI(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	pkgs := []string{"jrpc", "tracing", "remotes", "router", "stalker"}
	for _, p := range pkgs {
		out, err := exec.Command(gobin, "list", "-deps", "github.com/venn-gateway/venn/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") ||
				strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters") ||
				strings.HasPrefix(dep, "google.golang.org/grpc") {
				t.Errorf("%s depends on %s", p, dep)
			}
		}
	}
}
