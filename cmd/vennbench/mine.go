package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// The upstream child's chain controls, for the cluster benches: the head
// bench keeps the chain moving (-block-time) so venn's window is live; the
// propagation bench mines one block at a time (-control) and needs to know
// when it was mined and when the leader came to fetch it, on the same wall
// clock as its own measurements (one machine, so CLOCK_REALTIME is shared).
const (
	minePath    = "/vennbench/mine"
	fetchedPath = "/vennbench/fetched"
)

// mined is minePath's answer.
type mined struct {
	Number uint64 `json:"number"` // the new head
	At     int64  `json:"at"`     // Unix ns just before the node mined it
}

// fetched is fetchedPath's answer: when the last mined block was first
// asked for. Zero times: not asked yet.
type fetched struct {
	Number     uint64 `json:"number"`
	BlockAt    int64  `json:"block_at"`    // first eth_getBlockByNumber(number, true)
	ReceiptsAt int64  `json:"receipts_at"` // first eth_getBlockReceipts(its number or hash)
}

// chainControl mines on request and watches, through the node's hook, for
// the stalker's two fetches of the block it mined last.
type chainControl struct {
	node *fakenode.Node

	mu         sync.Mutex // one mine at a time
	num        atomic.Uint64
	hash       atomic.Pointer[string] // lowercase 0x hex of block num
	blockAt    atomic.Int64
	receiptsAt atomic.Int64
}

func newChainControl(node *fakenode.Node) *chainControl {
	return &chainControl{node: node}
}

// serveMine mines one block and answers with its number and time.
func (c *chainControl) serveMine(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	next := c.node.Head() + 1
	// A block's hash is known before it is mined; nothing can ask for it
	// until Mine makes it visible, so the watch is set up first.
	hash := strings.ToLower(c.node.BlockHash(next))
	c.blockAt.Store(0)
	c.receiptsAt.Store(0)
	c.hash.Store(&hash)
	c.num.Store(next)
	at := time.Now().UnixNano()
	c.node.Mine(1)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(mined{Number: next, At: at})
}

func (c *chainControl) serveFetched(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(fetched{Number: c.num.Load(), BlockAt: c.blockAt.Load(), ReceiptsAt: c.receiptsAt.Load()})
}

// hook is the node's fakenode.Hook: it only looks, and never answers.
func (c *chainControl) hook(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
	switch method {
	case "eth_getBlockByNumber":
		var p []json.RawMessage
		if json.Unmarshal(params, &p) != nil || len(p) != 2 || string(p[1]) != "true" {
			break
		}
		ref, err := evm.ParseBlockRef(p[0])
		if err == nil && ref.Kind == evm.RefNumber && ref.Number == c.num.Load() {
			c.blockAt.CompareAndSwap(0, time.Now().UnixNano())
		}
	case "eth_getBlockReceipts":
		// The leader asks by number while it asks for the block, and by
		// hash when that early answer was not the block's.
		var p []json.RawMessage
		if json.Unmarshal(params, &p) != nil || len(p) != 1 {
			break
		}
		ref, err := evm.ParseBlockRef(p[0])
		h := c.hash.Load()
		if err == nil && (ref.Kind == evm.RefNumber && ref.Number == c.num.Load() ||
			ref.Kind == evm.RefHash && h != nil && strings.EqualFold(ref.Hash, *h)) {
			c.receiptsAt.CompareAndSwap(0, time.Now().UnixNano())
		}
	}
	return nil, nil, false
}

// mineEvery mines a block every d until ctx ends.
func mineEvery(ctx context.Context, node *fakenode.Node, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			node.Mine(1)
		}
	}
}
