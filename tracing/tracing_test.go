package tracing

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
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func ratio(r float64) *float64 { return &r }

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // "" for valid
	}{
		{"empty", Config{}, ""},
		{"full", Config{Enabled: true, Endpoint: "https://otel.example:4318", Protocol: "http",
			SamplingRatio: ratio(0.1), Headers: map[string]string{"x-api-key": "k"}}, ""},
		{"host port", Config{Endpoint: "collector:4317", Protocol: "grpc"}, ""},
		{"protocol", Config{Protocol: "thrift"}, "protocol: must be grpc or http"},
		{"scheme", Config{Endpoint: "ftp://x"}, "endpoint: scheme must be http or https"},
		{"no host", Config{Endpoint: "http://"}, "endpoint: URL has no host"},
		{"ratio", Config{SamplingRatio: ratio(1.5)}, "sampling_ratio: must be between 0 and 1"},
		{"header", Config{Headers: map[string]string{"a b": "x"}}, "headers: \"a b\" is not a header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestConfigOnAndProtocol(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (Config{Enabled: true}).On() {
		t.Error("OTEL_SDK_DISABLED=true: tracing on")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	if !(Config{Enabled: true}).On() || (Config{}).On() {
		t.Error("On does not follow enabled")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if got := (Config{}).protocol(); got != ProtocolGRPC {
		t.Errorf("protocol from the variable = %q", got)
	}
	if got := (Config{Protocol: ProtocolHTTP}).protocol(); got != ProtocolHTTP {
		t.Errorf("protocol with config and variable = %q, want the config's", got)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if got := (Config{}).protocol(); got != ProtocolHTTP {
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
	p, err := Open(Config{Enabled: true, Endpoint: srv.URL, Protocol: ProtocolHTTP,
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

// TestOffCostsNothing: a nil Tracer starts nothing and allocates nothing,
// nor does a child under a span that does not record.
func TestOffCostsNothing(t *testing.T) {
	var off *Tracer
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, sp := off.Start(ctx, "x", trace.SpanKindInternal)
		if sp.IsRecording() {
			sp.SetAttributes(KeyRemote.String("a"))
		}
		sp.End()
		c, sp = off.StartRoot(c, "y", trace.SpanKindServer, nil)
		sp.End()
		off.SetSource(c, "head")
		_ = off.Inject(c, nil)
		_ = off.CallHook()
	})
	if allocs != 0 {
		t.Errorf("off: %v allocations per call, want 0", allocs)
	}
	if off.CallHook() != nil {
		t.Error("a nil Tracer's CallHook is not nil: jrpc would call it")
	}

	on := NewProvider(Config{}, nil)
	defer on.Shutdown(context.Background())
	tr := on.Tracer()
	allocs = testing.AllocsPerRun(100, func() {
		_, sp := tr.Start(ctx, "x", trace.SpanKindInternal) // no recording parent
		sp.End()
	})
	if allocs != 0 {
		t.Errorf("on, no parent: %v allocations per child, want 0", allocs)
	}
}

// TestInject: the trace context goes upstream only when propagating, in a
// copy of the shared headers.
func TestInject(t *testing.T) {
	p := NewProvider(Config{PropagateUpstream: true}, nil)
	defer p.Shutdown(context.Background())
	tr := p.Tracer()
	shared := http.Header{"Content-Type": {"application/json"}}
	ctx, sp := tr.StartRoot(context.Background(), "call", trace.SpanKindServer, nil)
	defer sp.End()
	got := tr.Inject(ctx, shared)
	want := "00-" + sp.SpanContext().TraceID().String() + "-" + sp.SpanContext().SpanID().String() + "-01"
	if got.Get("Traceparent") != want {
		t.Errorf("traceparent %q, want %q", got.Get("Traceparent"), want)
	}
	if shared.Get("Traceparent") != "" {
		t.Error("Inject wrote the shared headers")
	}
	if h := tr.Inject(context.Background(), shared); h.Get("Traceparent") != "" {
		t.Error("no span: a traceparent all the same")
	}
	quiet := NewProvider(Config{}, nil)
	defer quiet.Shutdown(context.Background())
	if h := quiet.Tracer().Inject(ctx, shared); h.Get("Traceparent") != "" {
		t.Error("propagate_upstream off: a traceparent all the same")
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
	p, err := Open(Config{Enabled: true, Endpoint: ln.Addr().String(), Protocol: ProtocolGRPC, Insecure: &yes})
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
