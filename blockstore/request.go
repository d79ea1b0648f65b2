package blockstore

import (
	"github.com/venn-gateway/venn/evm"
)

// kind is a method the store answers.
type kind uint8

const (
	kindBlock kind = iota + 1
	kindReceipts
	kindTx
	kindReceipt
	kindTxByIndex
	kindTxCount
	kindUncleCount
	kindLogs
)

// request is a call the store can answer, its params read as geth reads
// them (evm's Arg readers and LogFilter, shared with the head window).
type request struct {
	kind   kind
	byHash bool
	number uint64            // when !byHash
	hash   [evm.HashLen]byte // lowercase hex, when byHash
	full   bool              // eth_getBlockBy*: transaction objects
	index  uint64            // eth_getTransactionByBlock*AndIndex
	filter evm.LogFilter     // eth_getLogs
}

// parseRequest reads a call; ok is false for a method the store does not
// answer and for params it cannot answer exactly as the node would: tags
// (the store does not know the head), anything geth would refuse, anything
// unusual. The node gets those.
func parseRequest(method string, params []byte) (r request, ok bool) {
	switch method {
	case "eth_getBlockByNumber", "eth_getBlockByHash":
		var a [2][]byte
		if !evm.Args(params, a[:]) {
			return r, false
		}
		switch string(a[1]) {
		case "true":
			r.full = true
		case "false":
		default:
			return r, false // geth takes null as false; rare, so left to it
		}
		r.kind = kindBlock
		return r, r.block(a[0], method == "eth_getBlockByHash")
	case "eth_getBlockReceipts":
		var a [1][]byte
		if !evm.Args(params, a[:]) {
			return r, false
		}
		ref, ok := evm.ArgBlockNumberOrHash(a[0], &r.hash)
		r.kind, r.number, r.byHash = kindReceipts, ref.Number, ref.Kind == evm.RefHash
		return r, ok && (ref.Kind == evm.RefNumber || r.byHash)
	case "eth_getTransactionByHash", "eth_getTransactionReceipt":
		var a [1][]byte
		if !evm.Args(params, a[:]) || !evm.ArgHash(a[0], &r.hash) {
			return r, false
		}
		r.kind, r.byHash = kindTx, true
		if method == "eth_getTransactionReceipt" {
			r.kind = kindReceipt
		}
		return r, true
	case "eth_getTransactionByBlockNumberAndIndex", "eth_getTransactionByBlockHashAndIndex":
		var a [2][]byte
		if !evm.Args(params, a[:]) {
			return r, false
		}
		if r.index, ok = evm.ArgQuantity(a[1]); !ok {
			return r, false
		}
		r.kind = kindTxByIndex
		return r, r.block(a[0], method == "eth_getTransactionByBlockHashAndIndex")
	case "eth_getBlockTransactionCountByNumber", "eth_getBlockTransactionCountByHash":
		r.kind = kindTxCount
		return r, r.oneBlock(params, method == "eth_getBlockTransactionCountByHash")
	case "eth_getUncleCountByBlockNumber", "eth_getUncleCountByBlockHash":
		r.kind = kindUncleCount
		return r, r.oneBlock(params, method == "eth_getUncleCountByBlockHash")
	case "eth_getLogs":
		var a [1][]byte
		if !evm.Args(params, a[:]) || !r.filter.Parse(a[0]) {
			return r, false
		}
		r.kind = kindLogs
		if r.filter.ByHash {
			r.byHash, r.hash = true, r.filter.Hash
			return r, true
		}
		// Only explicit numbers: the store does not know the head, and
		// geth refuses a range that runs backwards.
		from, to := r.filter.From, r.filter.To
		return r, from.Kind == evm.RefNumber && to.Kind == evm.RefNumber && from.Number <= to.Number
	}
	return r, false
}

// oneBlock reads params holding only a block argument.
func (r *request) oneBlock(params []byte, byHash bool) bool {
	var a [1][]byte
	return evm.Args(params, a[:]) && r.block(a[0], byHash)
}

// block reads a block argument: a hash, or an explicit number.
func (r *request) block(raw []byte, byHash bool) bool {
	if byHash {
		r.byHash = true
		return evm.ArgHash(raw, &r.hash)
	}
	ref, ok := evm.ArgBlockNumber(raw)
	r.number = ref.Number
	return ok && ref.Kind == evm.RefNumber
}
