package verified

import (
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

// For is the check of a client's call (config integrity.client_calls):
// eth_getBlockByNumber and eth_getBlockByHash (the block asked for, its
// hash, and with full transactions their hashes and root),
// eth_getBlockReceipts (their root and bloom against their block when
// blocks, which may be nil, has it: no extra call is made for it) and
// eth_getTransactionReceipt (its bloom; it has no root). ok is false for
// every other call, and for a block parameter that does not parse: the
// node's own answer to it is served unchecked.
func For(call evm.Call, blocks Blocks) (verify func(json.RawMessage) integ.Verdict, ok bool) {
	switch call.Kind {
	case evm.KindBlock, evm.KindBlockReceipts:
		want, ok := call.BlockParam()
		if !ok {
			return nil, false
		}
		if call.Kind == evm.KindBlockReceipts {
			return func(res json.RawMessage) integ.Verdict {
				return integ.VerifyReceipts(res, want, func(h common.Hash) *integ.BlockInfo { return block(blocks, h) })
			}, true
		}
		return func(res json.RawMessage) integ.Verdict { return integ.VerifyBlock(res, want) }, true
	case evm.KindReceipt:
		return integ.VerifyReceipt, true
	}
	return nil, false
}

// block finds a block in the head window, checked again here: the window
// holds what the stalker served, and that may have been unverifiable.
func block(blocks Blocks, hash common.Hash) *integ.BlockInfo {
	if blocks == nil {
		return nil
	}
	h := hash.Hex()
	raw, ok := blocks.Answer(evm.ParseCall("eth_getBlockByHash", json.RawMessage(`[`+strconv.Quote(h)+`,true]`)))
	if !ok {
		return nil
	}
	v := integ.VerifyBlock(raw, evm.BlockRef{Kind: evm.RefHash, Hash: h})
	if v.Block == nil || v.Block.Hash != hash || len(v.Failed) > 0 {
		return nil
	}
	return v.Block
}
