package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/getlogs"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/tracing"
	"go.opentelemetry.io/otel/trace"
)

// meaning is what one remote's reply means to the call that asked: the one
// decision every strategy (single, hedged, voted, split, pinned) acts on.
type meaning uint8

const (
	// meanAnswer: a result to give the caller (or to vote with).
	meanAnswer meaning = iota
	// meanCaller: the caller's own error (a revert, invalid params): the
	// answer, from whichever remote.
	meanCaller
	// meanCut: the attempt was cut by its caller (the client left, or a
	// hedge race was over): nothing was learnt of the remote.
	meanCut
	// meanMissing: null where the route calls null missing data: the remote
	// claims the block and has not got it; another remote may.
	meanMissing
	// meanTooLarge: an eth_getLogs range too large for the remote (or with
	// too many results): split it, to judged.span blocks when the remote
	// named one. err is a *tooLargeError.
	meanTooLarge
	// meanLocal: venn's own limit for the remote (breaker, rate, in-flight,
	// wrong chain) kept the call from being sent: it costs no attempt.
	meanLocal
	// meanFault: anything else: an upstream fault, throttling, a bad or
	// rejected reply, a cap that a smaller range cannot cure. Another
	// remote may do better; over is set when the reply was over venn's own
	// cap, which only a remote allowed a larger reply can cure.
	meanFault
)

// judged is one reply and its meaning.
type judged struct {
	r    *Remote
	idx  int // r's slot (Remote.slot)
	mean meaning
	res  json.RawMessage
	err  error
	v    verdict.Verdict          // err classified; zero for answers and local limits
	over *wire.ReplyTooLargeError // meanFault over venn's own reply cap
}

// good reports a reply the caller can be given as it is: an answer or the
// caller's own error.
func (j judged) good() bool { return j.mean == meanAnswer || j.mean == meanCaller }

// judge decides what the replies of one call mean. It is the only place
// that does: the checks of the route (check, verify, nullIsMissing) run
// here, a result the route's check rejects is charged to its remote here,
// and a range cap a remote names is learnt here.
type judge struct {
	method string
	rt     route
	log    *slog.Logger
	tracer *tracing.Tracer // nil: off
	role   string          // of its sends, on their spans (trace.go); "": the call's own, no role
}

// ask sends the call to r (index idx), its n-th send, and judges the reply.
func (jg *judge) ask(ctx context.Context, r *Remote, idx, n int, params json.RawMessage) judged {
	return jg.send(ctx, r, idx, n, params, false)
}

// send sends the call to r (index idx) as the call's n-th send, withToken
// when it already holds r's rate-limit token, and judges the reply.
func (jg *judge) send(ctx context.Context, r *Remote, idx, n int, params json.RawMessage, withToken bool) judged {
	var label string // the span's name: only a tracer needs it
	if jg.tracer != nil {
		label = evm.MethodLabel(jg.method)
	}
	ctx, sp := jg.tracer.Start(ctx, label, trace.SpanKindClient)
	res, status, err := r.send(ctx, jg.method, params, withToken)
	j := jg.of(r, idx, res, err)
	if sp.IsRecording() {
		jg.annotate(sp, j, n, status)
	}
	sp.End()
	return j
}

// of judges one reply of remote r (index idx).
func (jg *judge) of(r *Remote, idx int, res json.RawMessage, err error) judged {
	j := judged{r: r, idx: idx, res: res, err: err}
	switch {
	case err == nil:
		j = jg.result(j)
	case errors.Is(err, errLocalLimit):
		j.mean = meanLocal
		return j
	default:
		j = jg.failure(j)
	}
	j.learnFrom(jg.rt.hist, jg.rt.histAt)
	return j
}

// result judges a result: the route's checks, then null as missing data.
func (jg *judge) result(j judged) judged {
	rt := &jg.rt
	if rt.check != nil {
		if cerr := rt.check(j.res); cerr != nil {
			j.err = fmt.Errorf("remote %s: %w", j.r.Name(), cerr)
			j.r.rejected(jg.method, j.err) // it answered, but nothing usable
			return jg.failure(j)
		}
	}
	if rt.verify != nil {
		// Not charged here: the caller blames once it has seen the others.
		if verr := rt.verify(j.r, j.res); verr != nil {
			j.err = fmt.Errorf("remote %s: %w", j.r.Name(), verr)
			return jg.failure(j)
		}
	}
	if rt.nullIsMissing && isNull(j.res) {
		j.mean = meanMissing
	}
	return j
}

// failure judges an error by its class.
func (jg *judge) failure(j judged) judged {
	j.v = verdict.Classify(jg.method, j.err)
	v := j.v
	if jg.log.Enabled(context.Background(), slog.LevelDebug) {
		jg.log.Debug("remote call failed", "remote", j.r.Name(), "method", jg.method,
			"class", v.Class.String(), "reason", string(v.Reason), "err", j.err)
	}
	switch {
	case v.Class == verdict.ClassCaller && v.Reason == verdict.ReasonCanceled:
		j.mean = meanCut
	case v.Class == verdict.ClassCaller:
		j.mean = meanCaller
	case v.Class == verdict.ClassTooLarge && jg.method == "eth_getLogs" && getlogs.Helps(v.Reason):
		// Only these can be cured by a smaller block range; other caps
		// (addresses, request or batch size) fail over.
		if v.Reason == verdict.ReasonRangeTooLarge && v.MaxSpan > 0 {
			j.r.learnSpan(v.MaxSpan) // a cap; a result-count hint is not
		}
		j.mean, j.err = meanTooLarge, &tooLargeError{Span: v.MaxSpan, Reason: v.Reason, Err: j.err}
	default:
		j.mean = meanFault
		if v.Class == verdict.ClassTooLarge {
			j.over, _ = errors.AsType[*wire.ReplyTooLargeError](j.err)
		}
	}
	return j
}
