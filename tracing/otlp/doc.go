// Package otlp is venn's OpenTelemetry SDK: the tracer provider (sampler,
// resource, a span batcher of its own) and its OTLP exporter over gRPC or HTTP,
// built from a tracing.Config. Only app imports it: the components make
// their spans through package tracing, which knows the API alone, so the
// SDK, the exporters and gRPC are linked in one place.
package otlp
