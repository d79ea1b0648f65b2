package app

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/tracing"
	"github.com/venn-gateway/venn/tracing/otlp"
)

// traceExporterName names the optional exporter spans go to
// (TraceExporter).
const traceExporterName = "app_trace_exporter"

// TraceExporter sends the app's spans to exp, batched as the OTLP exporter
// would be, in place of the one the config names (tests, benchmarks).
// tracing.enabled still decides whether there are spans at all.
func TraceExporter(exp sdktrace.SpanExporter) fx.Option {
	return fx.Provide(fx.Annotate(
		func() sdktrace.SpanExporter { return exp },
		fx.ResultTags(`name:"`+traceExporterName+`"`),
	))
}

type tracerParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Log       *slog.Logger
	Registry  *prometheus.Registry
	Exporter  sdktrace.SpanExporter `name:"app_trace_exporter" optional:"true"`
}

// newTracer installs the process's tracer provider when tracing is on
// (tracing.Config.On), flushed and stopped on the app's stop; nil (off:
// no SDK, no spans, no cost) otherwise. Every component gets the one
// *tracing.Tracer.
func newTracer(p tracerParams) (*tracing.Tracer, error) {
	cfg := p.Config.Tracing
	var tp *otlp.Provider // nil: off
	if cfg.On() {
		var err error
		if p.Exporter != nil {
			tp = otlp.NewBatchedProvider(cfg, p.Exporter)
		} else if tp, err = otlp.Open(cfg); err != nil {
			return nil, err
		}
	}
	// Exported with tracing off too (0: Dropped of a nil provider), so
	// that an alert on it or a dashboard finds it on every replica.
	p.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "venn", Subsystem: "trace", Name: "spans_dropped_total",
		Help: "Ended spans dropped because the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE).",
	}, func() float64 { return float64(tp.Dropped()) }))
	if tp == nil {
		return nil, nil
	}
	// The SDK reports failed exports only through OpenTelemetry's global
	// handler; without this they go to the standard logger, unformatted.
	log := p.Log
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "err", err)
	}))
	p.Lifecycle.Append(fx.Hook{OnStop: tp.Shutdown})
	return tp.Tracer(), nil
}
