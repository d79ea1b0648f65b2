package tracing

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// instrumentation names venn's tracer (the scope on every span).
const instrumentation = "github.com/venn-gateway/venn"

// Provider is the process's SDK tracer provider: it batches finished spans
// to its exporter in the background. Shutdown flushes what is queued.
type Provider struct {
	tp *sdktrace.TracerProvider
	t  *Tracer
}

// Open builds the OTLP exporter cfg describes and a provider on it. It
// does no I/O: the exporter connects on its first export.
func Open(cfg Config) (*Provider, error) {
	exp, err := newExporter(cfg)
	if err != nil {
		return nil, err
	}
	return NewProvider(cfg, sdktrace.WithBatcher(exp)), nil
}

// NewProvider builds a provider with cfg's sampler and resource that sends
// spans through proc (a batcher on any exporter; tests use an in-memory
// one; nil: spans are recorded and dropped).
func NewProvider(cfg Config, proc sdktrace.TracerProviderOption) *Provider {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(newResource(cfg))}
	if proc != nil {
		opts = append(opts, proc)
	}
	if r := cfg.SamplingRatio; r != nil {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*r))))
	}
	// Without a ratio the SDK reads OTEL_TRACES_SAMPLER (default: parent
	// based, always on).
	tp := sdktrace.NewTracerProvider(opts...)
	return &Provider{tp: tp, t: &Tracer{t: tp.Tracer(instrumentation), propagate: cfg.PropagateUpstream}}
}

// Tracer is the tracer every component gets; nil on a nil Provider.
func (p *Provider) Tracer() *Tracer {
	if p == nil {
		return nil
	}
	return p.t
}

// Shutdown flushes the spans queued and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// newResource is the SDK's default resource (which reads
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES) with the config's
// service name over it.
func newResource(cfg Config) *resource.Resource {
	name := cfg.ServiceName
	if name == "" && os.Getenv("OTEL_SERVICE_NAME") == "" {
		name = DefaultServiceName
	}
	if name == "" {
		return resource.Default()
	}
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return resource.Default() // only schema URLs conflict; a schemaless one cannot
	}
	return r
}

// newExporter is the OTLP exporter of cfg's protocol. Options are passed
// only for fields the config sets, so the OTEL_EXPORTER_OTLP_* variables
// the exporters read fill the rest.
func newExporter(cfg Config) (sdktrace.SpanExporter, error) {
	ctx := context.Background() // New only starts the client; no I/O
	if cfg.protocol() == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		switch {
		case strings.Contains(cfg.Endpoint, "://"):
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure != nil && *cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp grpc exporter: %w", err)
		}
		return exp, nil
	}
	var opts []otlptracehttp.Option
	switch {
	case strings.Contains(cfg.Endpoint, "://"):
		opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(cfg.Endpoint)))
	case cfg.Endpoint != "":
		opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure != nil && *cfg.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp http exporter: %w", err)
	}
	return exp, nil
}

// httpTracesURL gives a base URL the traces path, as
// OTEL_EXPORTER_OTLP_ENDPOINT is read; a URL with a path is taken as the
// traces URL itself.
func httpTracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}
