package stalker

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/tracing"
)

// The leader's spans: each block fetch and each archive write is a trace
// of its own (the sampler's to keep), with the remotes' sends of a fetch
// (remotes/trace.go) under it.
const (
	spanFetch   = "venn.stalker.fetch"
	spanArchive = "venn.archive.put"
)

// annotateFetch puts a block fetch's outcome on its span: the block, never
// its content; on failure only that it failed (the error's text is the
// logs').
func (s *Stalker) annotateFetch(sp trace.Span, method string, b *evm.Block, err error) {
	sp.SetAttributes(tracing.KeyChain.String(s.cfg.Chain), tracing.KeyFetch.String(method))
	if err != nil {
		sp.SetStatus(codes.Error, "fetch failed")
		return
	}
	sp.SetAttributes(tracing.KeyBlock.Int64(int64(b.Number)))
}

// put stores one batch of settled blocks, in a span of its own.
func (a *archiver) put(ctx context.Context, batch []*evm.Block) error {
	ctx, sp := a.tracer.StartRoot(ctx, spanArchive, trace.SpanKindInternal, nil)
	err := a.cfg.Store.Put(ctx, batch)
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyChain.String(a.chain), tracing.KeyBlocks.Int(len(batch)),
			tracing.KeyFrom.Int64(int64(batch[0].Number)), tracing.KeyTo.Int64(int64(batch[len(batch)-1].Number)))
		if err != nil {
			sp.SetStatus(codes.Error, "put failed")
		}
	}
	sp.End()
	return err
}
