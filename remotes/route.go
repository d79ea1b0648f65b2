package remotes

import (
	"encoding/json"

	"github.com/venn-gateway/venn/evm"
)

// route says how one call may be routed: which remotes selection may offer
// it, and what the judge makes of their replies.
type route struct {
	need          uint64             // the remote's head must reach this block (0: any)
	accept        func(*Remote) bool // extra filter (eth_getLogs span caps)
	once          bool               // writes: no failover once a remote may have acted
	nullIsMissing bool               // a null result means "try another remote"
	only          *Remote            // stateful calls: this remote and no other
	check         resultCheck        // a result it rejects is a bad reply: fail over
	// verify (integrity.go) is like check, but its caller judges the
	// answers and blames remotes once it has seen the others': a
	// rejected answer fails over and is not charged here.
	verify func(*Remote, json.RawMessage) error
}

// readRoute is how a read may be routed: to remotes that have its block.
func (p *Pool) readRoute(method string, params json.RawMessage) route {
	rt := route{}
	if i, ok := evm.BlockParamIndex(method); ok {
		if ref, err := evm.ParseBlockRef(evm.Param(params, i)); err == nil && ref.Kind == evm.RefNumber {
			rt.need = ref.Number
			// A null block from a remote that claims to have it is a
			// lagging or inconsistent remote, not an answer. Above the
			// best head null is the answer: indexers poll head+1 until it
			// exists, and must not make every remote pay for each poll.
			rt.nullIsMissing = (method == "eth_getBlockByNumber" || method == "eth_getBlockReceipts") &&
				ref.Number <= p.best.Load()
		}
	}
	if method == "eth_getBlockByHash" || method == "eth_getBlockReceipts" && isHashParam(evm.Param(params, 0)) {
		rt.nullIsMissing = true
	}
	return rt
}

// isHashParam reports a block parameter that names a block by hash.
func isHashParam(raw json.RawMessage) bool {
	ref, err := evm.ParseBlockRef(raw)
	return err == nil && ref.Kind == evm.RefHash
}

func isNull(b json.RawMessage) bool {
	return len(b) == 4 && string(b) == "null"
}
