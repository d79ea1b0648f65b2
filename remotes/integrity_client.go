package remotes

import (
	"context"
	"encoding/json"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/verified"
)

// VerifiedClient serves a chain's client calls through its pool and checks
// the blocks and receipts remotes send for them (config
// integrity.client_calls; what is checked is verified.For's). An answer
// that fails is served from another remote (Pool.CallVerified). Every
// other method goes to the pool as it is.
type VerifiedClient struct {
	p      *Pool
	blocks verified.Blocks // nil: receipts are checked against themselves only
}

// NewVerifiedClient wraps p; blocks may be nil.
func NewVerifiedClient(p *Pool, blocks verified.Blocks) *VerifiedClient {
	return &VerifiedClient{p: p, blocks: blocks}
}

// ServeCall answers one client call the router parsed.
func (c *VerifiedClient) ServeCall(ctx context.Context, call evm.Call) (json.RawMessage, error) {
	verify, ok := verified.For(call, c.blocks)
	if !ok {
		return c.p.ServeCall(ctx, call) // unchecked, or the node's own answer to a bad parameter
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
