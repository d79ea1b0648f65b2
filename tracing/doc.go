// Package tracing owns what venn's components need to make OpenTelemetry
// spans: the Tracer wrapper they hold, the attribute names they put on
// their spans, the span of every client call (a jrpc.CallHook, so that
// jrpc itself imports no OpenTelemetry), W3C trace context in and out, and
// the `tracing:` config. It imports only OpenTelemetry's API; the SDK
// provider and the OTLP exporters (and with them gRPC) are tracing/otlp's,
// which only app imports, so remotes, router and stalker stay light
// (deps_test.go checks it).
//
// Tracing is off unless configured on. Off, no SDK is installed and a nil
// *Tracer starts nothing: no span, no context, no attribute is allocated.
// On, a component's child span (Tracer.Start) exists only under a parent
// that records, so calls the sampler dropped cost one context lookup per
// component, and background work that is not traced (health polls) makes
// no spans at all.
//
// Spans carry names, numbers and bounded labels only: never a URL (remote
// URLs hold API keys), an API key, params or results.
package tracing
