package remotes

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

type sendResult struct {
	r   *Remote
	res json.RawMessage
	err error
}

// broadcast sends a raw transaction to several remotes at once and answers
// with the first success. It is never retried blindly: a resend of the same
// bytes is harmless, and "already known" counts as success (the hash is the
// keccak of the raw bytes). Sends still in flight when the client is
// answered finish in the background so the transaction spreads.
func (p *Pool) broadcast(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var (
		tried   uint64
		n       int
		results = make(chan sendResult, maxRemotes)
		pending int
	)
	send := func(k int) {
		for ; k > 0; k-- {
			r, idx := p.pick("eth_sendRawTransaction", route{}, tried)
			if r == nil {
				return
			}
			tried |= 1 << idx
			n++
			pending++
			// Detached from the client: the send must complete even if the
			// client is answered (or leaves) first.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CallDeadline)
			p.wg.Go(func() {
				defer cancel()
				res, err := r.call(sctx, "eth_sendRawTransaction", params)
				if err != nil && Classify("eth_sendRawTransaction", err).Reason == ReasonNonceTooLow && p.known(sctx, r, params) {
					res, err = txHash(params), nil
				}
				results <- sendResult{r, res, err}
			})
		}
	}
	send(p.cfg.BroadcastFanout)
	var callerErr, lastErr error
	for pending > 0 {
		var sr sendResult
		select {
		case sr = <-results:
		case <-ctx.Done():
			return nil, p.exhausted(ctx, "eth_sendRawTransaction", n, lastErr)
		}
		pending--
		if sr.err == nil {
			return sr.res, nil
		}
		if errors.Is(sr.err, errLocalLimit) {
			send(1)
			continue
		}
		v := Classify("eth_sendRawTransaction", sr.err)
		switch {
		case v.Reason == ReasonAlreadyKnown:
			if h := txHash(params); h != nil {
				return h, nil
			}
		case v.Class == ClassCaller:
			if callerErr == nil {
				callerErr = sr.err
			}
		default:
			lastErr = sr.err
			if pending == 0 && callerErr == nil && n < p.cfg.MaxAttempts {
				send(1) // that remote could not take it: another one may
			}
		}
	}
	if callerErr != nil {
		return nil, clientError(callerErr)
	}
	return nil, p.exhausted(ctx, "eth_sendRawTransaction", n, lastErr)
}

// known asks the remote that said "nonce too low" whether the transaction
// itself is already there: after an earlier broadcast it may be mined.
func (p *Pool) known(ctx context.Context, r *Remote, params json.RawMessage) bool {
	h := txHash(params)
	if h == nil {
		return false
	}
	res, err := r.call(ctx, "eth_getTransactionByHash", json.RawMessage("["+string(h)+"]"))
	return err == nil && !isNull(res)
}

// txHash is the quoted hash of the raw transaction in params, or nil. The
// hash is not always keccak(raw): a blob transaction is sent in its network
// form (with blobs, commitments and proofs), whose hash covers only the
// transaction, so the bytes are decoded first.
func txHash(params json.RawMessage) json.RawMessage {
	var args []string
	if err := json.Unmarshal(params, &args); err != nil || len(args) == 0 {
		return nil
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(args[0], "0x"), "0X"))
	if err != nil || len(raw) == 0 {
		return nil
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		// The node took it, so it is some form venn does not decode: for
		// everything but the blob network form the hash is keccak(raw).
		return json.RawMessage(`"` + crypto.Keccak256Hash(raw).Hex() + `"`)
	}
	return json.RawMessage(`"` + tx.Hash().Hex() + `"`)
}
