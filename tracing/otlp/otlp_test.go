package otlp

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/venn-gateway/venn/tracing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ratio(r float64) *float64 { return &r }

func TestProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if got := protocol(tracing.Config{}); got != tracing.ProtocolGRPC {
		t.Errorf("protocol from the variable = %q", got)
	}
	if got := protocol(tracing.Config{Protocol: tracing.ProtocolHTTP}); got != tracing.ProtocolHTTP {
		t.Errorf("protocol with config and variable = %q, want the config's", got)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if got := protocol(tracing.Config{}); got != tracing.ProtocolHTTP {
		t.Errorf("default protocol = %q", got)
	}
}

func TestHTTPTracesURL(t *testing.T) {
	for give, want := range map[string]string{
		"http://c:4318":           "http://c:4318/v1/traces",
		"http://c:4318/":          "http://c:4318/v1/traces",
		"https://c/otlp/v1/trace": "https://c/otlp/v1/trace",
	} {
		if got := httpTracesURL(give); got != want {
			t.Errorf("httpTracesURL(%q) = %q, want %q", give, got, want)
		}
	}
}

// receiver is an in-process OTLP/HTTP collector: it keeps each export's
// spans and headers.
type receiver struct {
	mu      sync.Mutex
	spans   []string          // span names
	service string            // service.name of the last export
	header  map[string]string // the last export's x-api-key
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.header = map[string]string{"x-api-key": r.Header.Get("X-Api-Key")}
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				rc.service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				rc.spans = append(rc.spans, sp.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestOpenExportsOverHTTP sends spans through the OTLP/HTTP exporter Open
// builds to an in-process receiver: the config's endpoint, headers and
// service name win over the variables; Shutdown flushes.
func TestOpenExportsOverHTTP(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=from-env")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing there: the config's must win
	p, err := Open(tracing.Config{Enabled: true, Endpoint: srv.URL, Protocol: tracing.ProtocolHTTP,
		Headers: map[string]string{"x-api-key": "from-config"}, ServiceName: "venn-test", SamplingRatio: ratio(1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Tracer()
	ctx, root := tr.StartRoot(context.Background(), "root", trace.SpanKindServer, nil)
	_, child := tr.Start(ctx, "child", trace.SpanKindClient)
	child.End()
	root.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if strings.Join(rc.spans, ",") != "child,root" {
		t.Errorf("received spans %v, want child,root", rc.spans)
	}
	if rc.service != "venn-test" || rc.header["x-api-key"] != "from-config" {
		t.Errorf("service %q, header %v: want the config's", rc.service, rc.header)
	}
}

// grpcReceiver is an in-process OTLP/gRPC collector keeping span names.
type grpcReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []string
}

func (g *grpcReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				g.spans = append(g.spans, sp.Name)
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestOpenExportsOverGRPC is TestOpenExportsOverHTTP for protocol grpc,
// host:port and insecure.
func TestOpenExportsOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &grpcReceiver{}
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, rc)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(ln) }()
	defer func() { gs.Stop(); <-served }()

	yes := true
	p, err := Open(tracing.Config{Enabled: true, Endpoint: ln.Addr().String(), Protocol: tracing.ProtocolGRPC, Insecure: &yes})
	if err != nil {
		t.Fatal(err)
	}
	_, sp := p.Tracer().StartRoot(context.Background(), "root", trace.SpanKindServer, nil)
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if strings.Join(rc.spans, ",") != "root" {
		t.Errorf("received spans %v, want root", rc.spans)
	}
}
