package remotes

import (
	"context"
	"encoding/json"

	integ "github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// broadcast is the broadcast strategy: it sends a raw transaction to
// several remotes at once and answers with the first success. It is never
// retried blindly: a resend of the same bytes is harmless, and "already
// known" counts as success (the hash is the keccak of the raw bytes). Sends
// still in flight when the client is answered finish in the background so
// the transaction spreads.
func (p *Pool) broadcast(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	const method = "eth_sendRawTransaction"
	a := p.newAttempt(method, params, route{})
	defer a.note(ctx)
	results := make(chan judged, maxRemotes)
	pending := 0
	send := func(k int) {
		for ; k > 0; k-- {
			r, idx := p.pick(method, a.rt, a.tried)
			if r == nil {
				return
			}
			a.sent(idx)
			pending++
			n := a.n // the goroutine must not read a, which this loop writes
			// Detached from the client: the send must complete even if the
			// client is answered (or leaves) first.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.conf().CallDeadline)
			p.wg.Go(func() {
				defer cancel()
				results <- a.sendTx(sctx, r, idx, n)
			})
		}
	}
	send(p.conf().BroadcastFanout)
	var callerErr error
	for pending > 0 {
		var j judged
		select {
		case j = <-results:
		case <-ctx.Done():
			return nil, p.exhausted(ctx, method, a.n, a.last)
		}
		pending--
		switch {
		case j.mean == meanAnswer:
			a.by = j.r
			return j.res, nil
		case j.mean == meanLocal:
			send(1)
		case j.v.Reason == verdict.ReasonAlreadyKnown:
			if h := txHash(params); h != nil {
				a.by = j.r
				return h, nil
			}
		case j.mean == meanCaller:
			if callerErr == nil {
				callerErr = j.err
			}
		default:
			a.last = j.err
			if pending == 0 && callerErr == nil && a.n < p.conf().MaxAttempts {
				send(1) // that remote could not take it: another one may
			}
		}
	}
	if callerErr != nil {
		return nil, clientError(callerErr)
	}
	return nil, p.exhausted(ctx, method, a.n, a.last)
}

// sendTx sends the transaction to r, the call's n-th send, and judges the
// reply. "Nonce too low" after an earlier broadcast may mean the
// transaction is already mined: then it is an answer.
func (a *attempt) sendTx(ctx context.Context, r *Remote, idx, n int) judged {
	jg := a.judge()
	j := jg.send(ctx, r, idx, n, a.params, false)
	if j.v.Reason == verdict.ReasonNonceTooLow && known(ctx, r, a.params) {
		j = judged{r: r, idx: idx, mean: meanAnswer, res: txHash(a.params)}
	}
	return j
}

// known asks the remote that said "nonce too low" whether the transaction
// itself is already there: after an earlier broadcast it may be mined.
func known(ctx context.Context, r *Remote, params json.RawMessage) bool {
	h := txHash(params)
	if h == nil {
		return false
	}
	res, err := r.call(ctx, "eth_getTransactionByHash", json.RawMessage("["+string(h)+"]"))
	return err == nil && !isNull(res)
}

// txHash is the quoted hash of the raw transaction in params, or nil
// (integ.SentTxHash).
func txHash(params json.RawMessage) json.RawMessage {
	h, ok := integ.SentTxHash(params)
	if !ok {
		return nil
	}
	return json.RawMessage(`"` + h + `"`)
}
