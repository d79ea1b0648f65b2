package fakenode

import (
	"encoding/json"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/venn-gateway/venn/jrpc"
)

// maxFilterBacklog bounds the hashes one pending-transaction filter keeps
// between polls; older ones go first (a client that stopped polling).
const maxFilterBacklog = 10_000

var errFilterNotFound = &jrpc.Error{Code: codeServer, Message: "filter not found"}

// pendingFilters are the eth_newPendingTransactionFilter filters, as geth
// keeps them: each collects the hashes of the transactions sent after it
// was made until eth_getFilterChanges takes them. A full-transaction
// filter (argument true) answers hashes too: the node does not decode the
// transactions it is sent, like a node that ignores the flag.
type pendingFilters struct {
	mu sync.Mutex
	m  map[string][]common.Hash
}

// newPendingFilter serves eth_newPendingTransactionFilter([fullTx]).
func (n *Node) newPendingFilter(params []byte) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 0)
	if rerr != nil {
		return nil, rerr
	}
	if args[0] != nil {
		var full bool
		if err := json.Unmarshal(args[0], &full); err != nil {
			return nil, argErr(0, err)
		}
	}
	id := newSubID()
	f := &n.pending
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string][]common.Hash)
	}
	f.m[id] = []common.Hash{}
	return []byte(`"` + id + `"`), nil
}

// filterID reads the one argument of eth_getFilterChanges and
// eth_uninstallFilter.
func filterID(params []byte) (string, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return "", rerr
	}
	var id string
	if err := json.Unmarshal(args[0], &id); err != nil {
		return "", argErr(0, err)
	}
	return id, nil
}

// filterChanges serves eth_getFilterChanges for pending-transaction
// filters: the hashes since the last poll, or geth's "filter not found".
func (n *Node) filterChanges(params []byte) ([]byte, *jrpc.Error) {
	id, rerr := filterID(params)
	if rerr != nil {
		return nil, rerr
	}
	f := &n.pending
	f.mu.Lock()
	hashes, ok := f.m[id]
	if ok {
		f.m[id] = []common.Hash{}
	}
	f.mu.Unlock()
	if !ok {
		return nil, errFilterNotFound
	}
	buf := append(make([]byte, 0, 2+len(hashes)*69), '[')
	for i, h := range hashes {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendHash(buf, h)
	}
	return append(buf, ']'), nil
}

// uninstallFilter serves eth_uninstallFilter: whether the filter existed.
func (n *Node) uninstallFilter(params []byte) ([]byte, *jrpc.Error) {
	id, rerr := filterID(params)
	if rerr != nil {
		return nil, rerr
	}
	f := &n.pending
	f.mu.Lock()
	_, ok := f.m[id]
	delete(f.m, id)
	f.mu.Unlock()
	if !ok {
		return []byte(resultFalse), nil
	}
	return []byte(resultTrue), nil
}

// addPending gives a sent transaction to every pending-transaction filter.
func (f *pendingFilters) add(h common.Hash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, hashes := range f.m {
		if len(hashes) >= maxFilterBacklog {
			hashes = hashes[1:]
		}
		f.m[id] = append(hashes, h)
	}
}

// PendingFilters is how many pending-transaction filters the node holds.
func (n *Node) PendingFilters() int {
	n.pending.mu.Lock()
	defer n.pending.mu.Unlock()
	return len(n.pending.m)
}

// DropFilters forgets every filter, as a restarted node (or another
// backend behind a provider's load balancer) does: their next
// eth_getFilterChanges gets "filter not found".
func (n *Node) DropFilters() {
	n.pending.mu.Lock()
	defer n.pending.mu.Unlock()
	clear(n.pending.m)
}
