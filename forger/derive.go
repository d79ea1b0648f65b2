package forger

import (
	"encoding/json"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// Source answers a call from blocks venn holds (the head window, the
// history store); ok is false when it cannot answer exactly as the node.
type Source func(c evm.Call) (res json.RawMessage, ok bool)

// bodyFields are what geth's RPCMarshalBlock adds to RPCMarshalHeader: a
// block without them is the header, byte for byte (geth marshals both as
// maps, with sorted keys).
var bodyFields = [...]string{"size", "transactions", "uncles", "withdrawals"}

// Derive answers c from a block src holds:
//   - eth_getHeaderByNumber, eth_getHeaderByHash: the block without its body
//     fields, or null where the block is null;
//   - eth_getUncleByBlock{Number,Hash}AndIndex: null for a null block or an
//     index past the block's uncles (every block since the merge has none);
//     an uncle itself is not held, so that call is left to the node.
//
// The block parameter is handed to src as sent (evm.Call.BlockCall), so
// src's reading of it (geth's) decides; ok is false whenever src cannot
// answer or the params are not exactly what geth reads, and the call goes
// on.
func Derive(c *evm.Call, src Source) (json.RawMessage, bool) {
	b, ok := c.BlockCall()
	if !ok {
		return nil, false
	}
	block, ok := src(b)
	switch {
	case !ok:
		return nil, false
	case string(block) == "null":
		return resultNull, true
	case c.Kind == evm.KindHeader:
		return without(block, bodyFields[:])
	}
	uncles := jsonscan.Member(block, "uncles")
	if len(uncles) == 0 || uncles[0] != '[' {
		return nil, false
	}
	it := jsonscan.Array{Data: uncles, I: 1}
	var count uint64
	for {
		if _, ok := it.Next(); !ok {
			break
		}
		count++
	}
	if c.Index >= count {
		return resultNull, true
	}
	return nil, false
}

// without returns the JSON object obj without the named members, the
// others as they are, in order.
func without(obj []byte, names []string) (json.RawMessage, bool) {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	it := jsonscan.Object{Data: obj, I: i + 1}
	for {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		drop := false
		for _, n := range names {
			if string(k) == n {
				drop = true
				break
			}
		}
		if drop {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, k...)
		out = append(out, '"', ':')
		out = append(out, v...)
	}
	return append(out, '}'), true
}
