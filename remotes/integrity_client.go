package remotes

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/ethereum/go-ethereum/common"

	"github.com/venn-gateway/venn/evm"
	integ "github.com/venn-gateway/venn/integrity"
)

// Blocks is where a client's receipts find the block they are checked
// against: the chain's head window. Answer answers a call from it, ok false
// when it can't.
type Blocks interface {
	Answer(c evm.Call) (res json.RawMessage, ok bool)
}

// VerifiedClient serves a chain's client calls through its pool and checks
// the blocks and receipts remotes send for them (config
// integrity.client_calls): eth_getBlockByNumber and eth_getBlockByHash (the
// block asked for, its hash, and with full transactions their hashes and
// root), eth_getBlockReceipts (their root and bloom against their block
// when the head window has it: no extra call is made for it) and
// eth_getTransactionReceipt (its bloom; it has no root). An answer that
// fails is served from another remote (Pool.CallVerified). Every other
// method goes to the pool as it is.
type VerifiedClient struct {
	p      *Pool
	blocks Blocks // nil: receipts are checked against themselves only
}

// NewVerifiedClient wraps p; blocks may be nil.
func NewVerifiedClient(p *Pool, blocks Blocks) *VerifiedClient {
	return &VerifiedClient{p: p, blocks: blocks}
}

// ServeCall answers one client call the router parsed.
func (c *VerifiedClient) ServeCall(ctx context.Context, call evm.Call) (json.RawMessage, error) {
	var verify func(json.RawMessage) integ.Verdict
	switch call.Kind {
	case evm.KindBlock, evm.KindBlockReceipts:
		want, ok := call.BlockParam()
		if !ok {
			return c.p.ServeCall(ctx, call) // the node's own answer to a bad parameter
		}
		if call.Kind == evm.KindBlockReceipts {
			verify = func(res json.RawMessage) integ.Verdict { return integ.VerifyReceipts(res, want, c.block) }
		} else {
			verify = func(res json.RawMessage) integ.Verdict { return integ.VerifyBlock(res, want) }
		}
	case evm.KindReceipt:
		verify = integ.VerifyReceipt
	default:
		return c.p.ServeCall(ctx, call)
	}
	// Identical verified calls share one, as plain reads do (dedup.go).
	key := "verified\x00" + call.Method + "\x00" + string(call.Params)
	res, shared, err := c.p.flights.do(ctx, key, func(ctx context.Context) (json.RawMessage, error) {
		res, _, err := c.p.callVerified(ctx, &call, verify, 0)
		return res, err
	})
	if shared {
		c.p.shared.Inc()
	}
	return res, err
}

// block finds a block in the head window, checked again here: the window
// holds what the stalker served, and that may have been unverifiable.
func (c *VerifiedClient) block(hash common.Hash) *integ.BlockInfo {
	if c.blocks == nil {
		return nil
	}
	h := hash.Hex()
	raw, ok := c.blocks.Answer(evm.ParseCall("eth_getBlockByHash", json.RawMessage(`[`+strconv.Quote(h)+`,true]`)))
	if !ok {
		return nil
	}
	v := integ.VerifyBlock(raw, evm.BlockRef{Kind: evm.RefHash, Hash: h})
	if v.Block == nil || v.Block.Hash != hash || len(v.Failed) > 0 {
		return nil
	}
	return v.Block
}
