package remotes

import (
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/tracing"
)

// Upstream attempt spans: one per send of a traced call, started by the
// judge around the send and the judgement of its reply, so that each span
// says what its reply meant (meaning, class, reason) in the words every
// strategy acts on. Health polls and other untraced work start none
// (tracing.Tracer.Start needs a recording parent).

// Roles of a send, on its span. A call's own sends (its first, and a
// failover after one) have no role on their spans: the attribute is on
// hedges and ballots only, one attribute fewer on every common send.
const (
	roleHedge = "hedge" // a hedge fired by a race (hedge.go)
	roleVote  = "vote"  // a ballot of a voted call (vote.go)
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

// annotate puts a judged reply on its attempt span, in one call: four
// attributes for an answer to a call's own send over HTTP, eight at most,
// as many as the SDK's dedupe at End counts without a map on the heap.
// The span's name is its method's label, so no rpc.method repeats it (nor
// rpc.system, the same jsonrpc on every send). status is the reply's HTTP
// status (0: none).
func (jg *judge) annotate(sp trace.Span, j judged, n, status int) {
	a := tracing.NewAttrs()
	a.Add(tracing.KeyRemote.String(j.r.Name()))
	a.Add(tracing.KeyAttempt.Int(n))
	if jg.role != "" {
		a.Add(tracing.KeyRole.String(jg.role))
	}
	a.Add(tracing.KeyMeaning.String(j.mean.String()))
	if status != 0 {
		a.Add(tracing.KeyHTTPStatus.Int(status))
	}
	failed := j.err != nil && j.mean != meanLocal
	if failed {
		a.Add(tracing.KeyClass.String(j.v.Class.String()))
		a.Add(tracing.KeyReason.String(string(j.v.Reason)))
		if code, _ := errorCodes(j.err); code != 0 {
			a.Add(tracing.KeyRPCErrorCode.Int(code))
		}
	}
	a.Set(sp)
	if failed && (j.mean == meanFault || j.mean == meanTooLarge) {
		// Only the reason: an error's text may quote the remote's reply.
		sp.SetStatus(codes.Error, string(j.v.Reason))
	}
}
