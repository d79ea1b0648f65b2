package remotes

import (
	"context"
	"maps"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/venn-gateway/venn/tracing"
)

// TestAnnotateRole: a call's own send has no role on its span; a hedge and
// a ballot say theirs.
func TestAnnotateRole(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r := &Remote{cfg: Config{Name: "a"}}
	for _, role := range []string{"", roleHedge, roleVote} {
		exp.Reset()
		_, sp := tp.Tracer("test").Start(context.Background(), "eth_call")
		jg := &judge{method: "eth_call", role: role}
		jg.annotate(sp, judged{r: r, mean: meanAnswer}, 1, http.StatusOK)
		sp.End()
		got := map[attribute.Key]string{}
		for _, kv := range exp.GetSpans()[0].Attributes {
			got[kv.Key] = kv.Value.Emit()
		}
		want := map[attribute.Key]string{tracing.KeyRemote: "a", tracing.KeyAttempt: "1",
			tracing.KeyMeaning: "answer", tracing.KeyHTTPStatus: "200"}
		if role != "" {
			want[tracing.KeyRole] = role
		}
		if !maps.Equal(got, want) {
			t.Errorf("role %q: attributes %v, want %v", role, got, want)
		}
	}
}
