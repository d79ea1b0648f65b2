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
func (h callHook) StartCall(ctx context.Context, c jrpc.CallInfo) context.Context {
	ctx, sp := h.t.StartRoot(ctx, c.Method, trace.SpanKindServer, c.Header)
	if !sp.IsRecording() {
		return ctx
	}
	sp.SetAttributes(KeyRPCSystem.String("jsonrpc"), KeyRPCMethod.String(c.Method),
		KeyChain.String(c.Chain), KeyTransport.String(c.Transport), KeyRequestID.String(jrpc.RequestID(ctx)))
	if c.Index >= 0 {
		sp.SetAttributes(KeyBatchIndex.Int(c.Index))
	}
	return ctx
}

// EndCall records the answer's outcome and ends the span. Only venn's and
// the upstreams' failures mark it an error; a revert or bad params is the
// caller's answer, served as it should be.
func (h callHook) EndCall(ctx context.Context, outcome string, code int) {
	sp := trace.SpanFromContext(ctx)
	if sp.IsRecording() {
		sp.SetAttributes(KeyOutcome.String(outcome))
		if code != 0 {
			sp.SetAttributes(KeyRPCErrorCode.Int(code))
		}
		switch outcome {
		case "timeout", "no_remote", "internal":
			sp.SetStatus(codes.Error, outcome)
		}
	}
	sp.End()
}
