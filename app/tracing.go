package app

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/tracing"
)

// newTracer installs the process's tracer provider when tracing is on
// (tracing.Config.On), flushed and stopped on the app's stop; nil (off:
// no SDK, no spans, no cost) otherwise. Every component gets the one
// *tracing.Tracer.
func newTracer(lc fx.Lifecycle, cfg *Config, log *slog.Logger) (*tracing.Tracer, error) {
	if !cfg.Tracing.On() {
		return nil, nil
	}
	p, err := tracing.Open(cfg.Tracing)
	if err != nil {
		return nil, err
	}
	// The SDK reports failed exports only through OpenTelemetry's global
	// handler; without this they go to the standard logger, unformatted.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "err", err)
	}))
	lc.Append(fx.Hook{OnStop: func(ctx context.Context) error { return p.Shutdown(ctx) }})
	return p.Tracer(), nil
}
