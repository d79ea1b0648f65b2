package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Protocols of the OTLP exporter.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// DefaultServiceName is service.name when neither the config nor
// OTEL_SERVICE_NAME names one.
const DefaultServiceName = "venn"

// Config is the `tracing:` section. Every field left unset falls back to
// the standard OTEL_* variable the SDK reads (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_INSECURE,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_TRACES_SAMPLER and _ARG,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, and their _TRACES_ forms):
// where both are set, the config wins.
type Config struct {
	// Enabled switches tracing on; off (the default) installs no SDK.
	// OTEL_SDK_DISABLED=true keeps it off whatever this says.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the collector: host:port, or a URL (http:// implies
	// insecure). For HTTP a URL without a path gets /v1/traces, as
	// OTEL_EXPORTER_OTLP_ENDPOINT does. "": the variables, else
	// localhost:4317 (gRPC) or localhost:4318 (HTTP).
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc or http (OTLP/HTTP protobuf). "":
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL,
	// else http, the OTLP default.
	Protocol string `yaml:"protocol"`
	// Insecure sends without TLS to a host:port endpoint; nil: the
	// variables (default TLS).
	Insecure *bool `yaml:"insecure"`
	// Headers go on every export (an API key of a hosted collector: use
	// ${ENV}). They replace OTEL_EXPORTER_OTLP_HEADERS when set.
	Headers map[string]string `yaml:"headers"`
	// SamplingRatio is the share of new traces recorded, 0 to 1; a call
	// whose client sent a traceparent follows the client's sampled flag.
	// nil: OTEL_TRACES_SAMPLER, else 1 (every call).
	SamplingRatio *float64 `yaml:"sampling_ratio"`
	// ServiceName is service.name; "": OTEL_SERVICE_NAME, else venn.
	ServiceName string `yaml:"service_name"`
	// PropagateUpstream sends the upstream attempt's traceparent (and
	// tracestate) to HTTP remotes, so a provider that traces joins the
	// trace. Off by default: it tells the provider the caller's trace id.
	PropagateUpstream bool `yaml:"propagate_upstream"`
}

// On reports whether tracing is to run: enabled, and not disabled by
// OTEL_SDK_DISABLED.
func (c Config) On() bool {
	return c.Enabled && !strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")
}

// Validate checks the section; messages name the field under "tracing".
func (c Config) Validate() error {
	var errs []error
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		errs = append(errs, fmt.Errorf("protocol: must be grpc or http, not %q", c.Protocol))
	}
	if c.Endpoint != "" && strings.Contains(c.Endpoint, "://") {
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil:
			// url's error quotes the text, which may hold a token.
			errs = append(errs, errors.New("endpoint: not a valid URL"))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("endpoint: scheme must be http or https, not %q", u.Scheme))
		case u.Host == "":
			errs = append(errs, errors.New("endpoint: URL has no host"))
		}
	}
	if r := c.SamplingRatio; r != nil && (*r < 0 || *r > 1) {
		errs = append(errs, fmt.Errorf("sampling_ratio: must be between 0 and 1, not %g", *r))
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			errs = append(errs, fmt.Errorf("headers: %q is not a header name", k))
		}
	}
	return errors.Join(errs...)
}
