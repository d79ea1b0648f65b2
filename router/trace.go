package router

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/tracing"
)

// Sources of an answer: venn_answers_total's source label, the call's
// jrpc.Note and so its span's venn.source.
const (
	sourceLocal   = "local"
	sourceHead    = "head"
	sourceHistory = "history"
	sourceCache   = "cache"
	sourceForger  = "forger"
	sourceRemotes = "remotes"
)

// Lookup spans: children of the client call's span for the sources venn
// answers from itself. The remotes' own spans are their sends
// (remotes/trace.go). The response cache's, between history and the
// remotes, is spanCache (cache.go).
const (
	spanHead    = "venn.head"
	spanHistory = "venn.history"
	spanCache   = "venn.cache"
	spanForger  = "venn.forger"
)

// origin is one place calls are answered from: counted, and named in the
// call's note, which the call's span reads too (tracing's jrpc.CallHook).
type origin struct {
	name    string
	answers prometheus.Counter
}

func newSource(m *Metrics, cfg Config, name string) origin {
	return origin{name: name, answers: m.answers.WithLabelValues(cfg.Chain, name)}
}

// answered counts a call answered here and names the source in its note.
func (s origin) answered(ctx context.Context) {
	s.answers.Inc()
	jrpc.NoteOf(ctx).Answered(s.name)
}

// answeredBy counts and notes a call answered by s, unless err says venn
// answered it itself (jrpc.Local): then by local.
func (rt *Router) answeredBy(ctx context.Context, err error, s origin) {
	if err != nil && jrpc.IsLocal(err) {
		s = rt.local
	}
	s.answered(ctx)
}

// lookup starts the span of a lookup in one of venn's own sources; end it
// with endLookup. Untraced calls get ctx back and a span that records
// nothing.
func (rt *Router) lookup(ctx context.Context, name string) (context.Context, trace.Span) {
	return rt.cfg.Tracer.Start(ctx, name, trace.SpanKindInternal)
}

// endLookup says whether the lookup answered, and ends its span.
func endLookup(sp trace.Span, hit bool) {
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyHit.Bool(hit))
	}
	sp.End()
}
