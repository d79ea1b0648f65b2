package remotes

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/tracing"
)

// Upstream attempt spans: one per send of a traced call, started by the
// judge around the send and the judgement of its reply, so that each span
// says what its reply meant (meaning, class, reason) in the words every
// strategy acts on. Health polls and other untraced work start none
// (tracing.Tracer.Start needs a recording parent).

// Roles of a send, on its span.
const (
	rolePrimary = "primary" // a call's send, or a failover after one
	roleHedge   = "hedge"   // a hedge fired by a race (hedge.go)
	roleVote    = "vote"    // a ballot of a voted call (vote.go)
)

func (m meaning) String() string {
	switch m {
	case meanAnswer:
		return "answer"
	case meanCaller:
		return "caller"
	case meanCut:
		return "cut"
	case meanMissing:
		return "missing"
	case meanTooLarge:
		return "too_large"
	case meanLocal:
		return "local"
	default:
		return "fault"
	}
}

// send sends the call to r (index idx) as the call's n-th send, withToken
// when it already holds r's rate-limit token, and judges the reply.
func (jg *judge) send(ctx context.Context, r *Remote, idx, n int, params json.RawMessage, withToken bool) judged {
	ctx, sp := jg.tracer.Start(ctx, evm.MethodLabel(jg.method), trace.SpanKindClient)
	var (
		res json.RawMessage
		err error
	)
	if withToken {
		res, err = r.callWithToken(ctx, jg.method, params)
	} else {
		res, err = r.call(ctx, jg.method, params)
	}
	j := jg.of(r, idx, res, err)
	if sp.IsRecording() {
		jg.annotate(sp, j, n)
	}
	sp.End()
	return j
}

// annotate puts a judged reply on its attempt span. The HTTP status of an
// answer the transport set itself (transport_http.go).
func (jg *judge) annotate(sp trace.Span, j judged, n int) {
	role := jg.role
	if role == "" {
		role = rolePrimary
	}
	sp.SetAttributes(tracing.KeyRPCSystem.String("jsonrpc"), tracing.KeyRPCMethod.String(evm.MethodLabel(jg.method)),
		tracing.KeyRemote.String(j.r.Name()), tracing.KeyAttempt.Int(n), tracing.KeyRole.String(role),
		tracing.KeyMeaning.String(j.mean.String()))
	if j.err == nil || j.mean == meanLocal {
		return
	}
	code, status := errorCodes(j.err)
	sp.SetAttributes(tracing.KeyClass.String(j.v.Class.String()), tracing.KeyReason.String(string(j.v.Reason)))
	if code != 0 {
		sp.SetAttributes(tracing.KeyRPCErrorCode.Int(code))
	}
	if status != 0 {
		sp.SetAttributes(tracing.KeyHTTPStatus.Int(status))
	}
	if j.mean == meanFault || j.mean == meanTooLarge {
		// Only the reason: an error's text may quote the remote's reply.
		sp.SetStatus(codes.Error, string(j.v.Reason))
	}
}
