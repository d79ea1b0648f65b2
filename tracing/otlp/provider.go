package otlp

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/venn-gateway/venn/tracing"
)

// instrumentation names venn's tracer (the scope on every span).
const instrumentation = "github.com/venn-gateway/venn"

// Provider is the process's SDK tracer provider: it batches finished spans
// to its exporter in the background. Shutdown flushes what is queued.
type Provider struct {
	tp *sdktrace.TracerProvider
	t  *tracing.Tracer
	b  *Batcher // nil when built with another processor (NewProvider)
}

// Open builds the OTLP exporter cfg describes and a provider on it. It
// does no I/O: the exporter connects on its first export.
func Open(cfg tracing.Config) (*Provider, error) {
	exp, err := newExporter(cfg)
	if err != nil {
		return nil, err
	}
	return NewBatchedProvider(cfg, exp), nil
}

// NewBatchedProvider builds a provider that sends spans to exp through a
// Batcher with the OTEL_BSP_* variables' limits (BatchOptionsFromEnv).
func NewBatchedProvider(cfg tracing.Config, exp sdktrace.SpanExporter) *Provider {
	b := NewBatcher(exp, BatchOptionsFromEnv())
	p := NewProvider(cfg, sdktrace.WithSpanProcessor(b))
	p.b = b
	return p
}

// NewProvider builds a provider with cfg's sampler and resource that sends
// spans through proc (a processor on any exporter: tests and benchmarks;
// nil: spans are recorded and dropped).
func NewProvider(cfg tracing.Config, proc sdktrace.TracerProviderOption) *Provider {
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
	return &Provider{tp: tp, t: tracing.FromTracer(tp.Tracer(instrumentation), cfg.PropagateUpstream)}
}

// Tracer is the tracer every component gets; nil on a nil Provider.
func (p *Provider) Tracer() *tracing.Tracer {
	if p == nil {
		return nil
	}
	return p.t
}

// Dropped is how many spans the provider's Batcher dropped because its
// queue was full; 0 without one.
func (p *Provider) Dropped() uint64 {
	if p == nil || p.b == nil {
		return 0
	}
	return p.b.Dropped()
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
func newResource(cfg tracing.Config) *resource.Resource {
	name := cfg.ServiceName
	if name == "" && os.Getenv("OTEL_SERVICE_NAME") == "" {
		name = tracing.DefaultServiceName
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
