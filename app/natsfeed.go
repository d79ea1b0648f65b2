package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/remotes"
)

// fetchHeader finds a block by hash through the chain's remotes, header
// only: the JetStream feed's catch-up walks an orphaned branch by number,
// hash and parent, and names its blocks in a reorg event.
func fetchHeader(pool *remotes.Pool) headstore.FetchBlock {
	return func(ctx context.Context, hash string) (*evm.Parts, error) {
		res, err := pool.Call(ctx, "eth_getBlockByHash", json.RawMessage(`[`+strconv.Quote(hash)+`,false]`))
		if err != nil {
			return nil, err
		}
		if string(res) == "null" {
			return nil, nil
		}
		var h struct {
			Number string `json:"number"`
			Hash   string `json:"hash"`
			Parent string `json:"parentHash"`
		}
		if err := json.Unmarshal(res, &h); err != nil {
			return nil, fmt.Errorf("block %s: %w", hash, err)
		}
		n, err := evm.ParseQuantity(h.Number)
		if err != nil {
			return nil, fmt.Errorf("block %s: number %q: %w", hash, h.Number, err)
		}
		return &evm.Parts{Block: &evm.Block{Number: n, Hash: h.Hash, Parent: h.Parent}}, nil
	}
}
