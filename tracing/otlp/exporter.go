package otlp

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/venn-gateway/venn/tracing"
)

// newExporter is the OTLP exporter of cfg's protocol. Options are passed
// only for fields the config sets, so the OTEL_EXPORTER_OTLP_* variables
// the exporters read fill the rest.
func newExporter(cfg tracing.Config) (sdktrace.SpanExporter, error) {
	ctx := context.Background() // New only starts the client; no I/O
	if protocol(cfg) == tracing.ProtocolGRPC {
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

// protocol is the exporter's protocol after the variables.
func protocol(c tracing.Config) string {
	if c.Protocol != "" {
		return c.Protocol
	}
	for _, env := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch v := os.Getenv(env); {
		case v == "grpc":
			return tracing.ProtocolGRPC
		case strings.HasPrefix(v, "http"):
			return tracing.ProtocolHTTP
		}
	}
	return tracing.ProtocolHTTP
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
