package tracing

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/jrpc"
)

// CallHook is the jrpc.CallHook that gives every client call its span, in
// the client's trace when the request (or the WebSocket upgrade) carried a
// traceparent; nil when t is (tracing off), so jrpc skips the hook.
func (t *Tracer) CallHook() jrpc.CallHook {
	if t == nil {
		return nil
	}
	return callHook{t: t}
}

type callHook struct{ t *Tracer }

var _ jrpc.CallHook = callHook{}

// StartCall starts the call's span, named by the method's bounded label.
// Its attributes wait for EndCall, so that the span gets them all in one
// call.
func (h callHook) StartCall(ctx context.Context, c jrpc.CallInfo) context.Context {
	ctx, _ = h.t.StartRoot(ctx, c.Method, trace.SpanKindServer, c.Header)
	return ctx
}

// EndCall puts what is known of the call on its span and ends it: the
// call's own (chain, method, request id, batch index), the answer's
// outcome and code, and the source that answered, from the call's
// jrpc.Note. The remote and the attempts are on the call's send spans and
// not repeated here, and the transport is not on it: each attribute costs
// every traced call its share in the SDK (see docs/benchmarks-log.md), and a common
// call has five. rpc.system, the same jsonrpc on every call, is on none of
// venn's spans. Only venn's and the upstreams' failures mark the span an
// error; a revert or bad params is the caller's answer, served as it
// should be.
func (h callHook) EndCall(ctx context.Context, c jrpc.CallInfo, outcome string, code int) {
	sp := trace.SpanFromContext(ctx)
	if sp.IsRecording() {
		a := NewAttrs()
		a.Add(KeyRPCMethod.String(c.Method))
		a.Add(KeyChain.String(c.Chain))
		a.Add(KeyRequestID.String(c.RequestID))
		if c.Index >= 0 {
			a.Add(KeyBatchIndex.Int(c.Index))
		}
		a.Add(KeyOutcome.String(outcome))
		if n := c.Note; n != nil && n.Source != "" {
			a.Add(KeySource.String(n.Source))
		}
		if code != 0 {
			a.Add(KeyRPCErrorCode.Int(code))
		}
		a.Set(sp)
		switch outcome {
		case "timeout", "no_remote", "internal":
			sp.SetStatus(codes.Error, outcome)
		}
	}
	sp.End()
}
