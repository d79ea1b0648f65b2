package remotes

import (
	"context"
	"encoding/json"

	"github.com/venn-gateway/venn/evm"
)

// callView is what the pool reads of a call's params to route, vote and
// hedge it: the router's parse of the call (evm.Call), kept small enough
// to travel by value in a route (an evm.Call is large, and a route goes
// into the goroutines of a hedge).
type callView struct {
	row      *evm.Method // the method's registry row (evm.Call.Row)
	hasBlock bool        // the method has a block param (evm.Method.Block)
	blockOK  bool        // and it reads
	logsOK   bool        // eth_getLogs: the filter's span reads
	byHash   bool        // eth_getLogs by blockHash
	block    blockAt
	from, to blockAt // eth_getLogs
}

// blockAt is a block reference without its hash, which the pool never
// reads.
type blockAt struct {
	kind evm.RefKind
	n    uint64
}

func at(r evm.BlockRef) blockAt     { return blockAt{kind: r.Kind, n: r.Number} }
func (b blockAt) ref() evm.BlockRef { return evm.BlockRef{Kind: b.kind, Number: b.n} }

// viewOf is the pool's view of a parsed call.
func viewOf(c *evm.Call) callView {
	return callView{row: c.Row, hasBlock: c.BlockAt >= 0, blockOK: c.BlockOK, block: at(c.Block),
		logsOK: c.RangeOK, byHash: c.Range.ByHash, from: at(c.Range.From), to: at(c.Range.To)}
}

// logRange is an eth_getLogs filter's span, as routing reads it.
func (cv *callView) logRange() evm.LogRange {
	return evm.LogRange{From: cv.from.ref(), To: cv.to.ref(), ByHash: cv.byHash}
}

// view is the one accessor through which the pool's internals read a
// call's params: the route's view when the call came in parsed (ServeCall,
// Call), else a parse of the call the pool built itself (the parts of a
// split eth_getLogs, a verified call, ...).
func (rt *route) view(method string, params json.RawMessage) callView {
	if rt.parsed {
		return rt.cv
	}
	c := evm.ParseCall(method, params)
	return viewOf(&c)
}

// withView returns rt carrying cv, so that nothing below reads the params
// again.
func (rt route) withView(cv callView) route {
	rt.cv, rt.parsed = cv, true
	return rt
}

// row is the method's registry row: the parsed call's, else looked up.
func (rt *route) row(method string) *evm.Method {
	if rt.parsed {
		return rt.cv.row
	}
	return evm.Lookup(method)
}

// hedgeable reports whether the call may be hedged at all
// (evm.Method.Hedgeable).
func (rt *route) hedgeable(method string) bool { return rt.row(method).Hedgeable() }

// ServeCall answers one client call the router parsed (evm.ParseCall),
// within the chain's call deadline; the pool does not read its params
// again. c is taken by value so that a caller behind an interface does not
// move it to the heap.
func (p *Pool) ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error) {
	return p.call(ctx, &c)
}
