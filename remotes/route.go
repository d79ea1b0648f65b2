package remotes

import (
	"encoding/json"

	"github.com/venn-gateway/venn/evm"
)

// route says how one call may be routed: which remotes selection may offer
// it, and what the judge makes of their replies.
type route struct {
	need          uint64             // the remote's head must reach this block (0: any)
	floor         uint64             // and this one, the client's (jrpc.MinHead), even above the best head
	accept        func(*Remote) bool // extra filter (eth_getLogs span caps)
	once          bool               // writes: no failover once a remote may have acted
	nullIsMissing bool               // a null result means "try another remote"
	only          *Remote            // stateful calls: this remote and no other
	hist          DataKind           // the historical data it reads (avail.go); KindNone: none
	histAt        uint64             // the oldest block it reads it at
	unsure        bool               // no remote is known to keep it: try those not known to lack it
	check         resultCheck        // a result it rejects is a bad reply: fail over
	parsed        bool               // cv is the call's view (call.go); else view parses
	cv            callView
	// verify (integrity.go) is like check, but its caller judges the
	// answers and blames remotes once it has seen the others': a
	// rejected answer fails over and is not charged here.
	verify func(*Remote, json.RawMessage) error
	// hedger is the call's own hedge (CallVerified's hedge); nil: the
	// chain's hedge groups, if any.
	hedger *hedger
}

// readRoute is how a read may be routed: to remotes that have its block.
func (p *Pool) readRoute(method string, cv callView) route {
	rt := route{}.withView(cv)
	if cv.hasBlock && cv.blockOK && cv.block.kind == evm.RefNumber {
		rt.need = cv.block.n
		// A null block from a remote that claims to have it is a
		// lagging or inconsistent remote, not an answer. Above the
		// best head null is the answer: indexers poll head+1 until it
		// exists, and must not make every remote pay for each poll.
		rt.nullIsMissing = (method == "eth_getBlockByNumber" || method == "eth_getBlockReceipts") &&
			cv.block.n <= p.heads.Head()
	}
	if method == "eth_getBlockByHash" || method == "eth_getBlockReceipts" && cv.blockOK && cv.block.kind == evm.RefHash {
		rt.nullIsMissing = true
	}
	return rt
}

func isNull(b json.RawMessage) bool {
	return len(b) == 4 && string(b) == "null"
}
