package fakenode

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/jrpc"
)

// Hook sees every call before the node does. handled true answers the call
// with result (nil means JSON null) or, when rpcErr is set, with rpcErr.
type Hook func(method string, params json.RawMessage) (result json.RawMessage, rpcErr *jrpc.Error, handled bool)

// faults is one immutable fault setting. Setters publish a modified copy,
// so a request reads all of them with one atomic load.
type faults struct {
	latency    time.Duration
	slowEvery  uint64 // every slowEvery-th request waits slowExtra more; 0 off
	slowExtra  time.Duration
	failStatus int
	failBody   string
	rpcErr     *jrpc.Error
	echo       func(r *http.Request) *jrpc.Error
	chainID    uint64 // reported chain id; 0 means the real one
	maxLogs    uint64 // eth_getLogs range cap in blocks; 0 off
	maxResults int    // eth_getLogs result cap below MaxLogResults; 0 off
	bogusHead  uint64 // head claimed but not served; 0 off
	stateKeep  uint64 // state kept for this many blocks below the head; 0: all (archive)
	drop       bool
	garbage    bool
}

func (n *Node) setFault(fn func(*faults)) {
	n.faultMu.Lock()
	defer n.faultMu.Unlock()
	f := *n.faults.Load()
	fn(&f)
	n.faults.Store(&f)
}

// SetLatency delays every answer by d.
func (n *Node) SetLatency(d time.Duration) { n.setFault(func(f *faults) { f.latency = d }) }

// SetSlowTail delays every round(1/fraction)-th request by d more. A
// fraction of 0 or less turns it off; 1 or more delays every request.
func (n *Node) SetSlowTail(fraction float64, d time.Duration) {
	every := uint64(0)
	switch {
	case fraction >= 1:
		every = 1
	case fraction > 0:
		every = uint64(math.Round(1 / fraction))
	}
	n.setFault(func(f *faults) { f.slowEvery, f.slowExtra = every, d })
}

// SetFailStatus answers every HTTP request with status and a short plain
// text body; 0 turns it off.
func (n *Node) SetFailStatus(status int) { n.SetFailBody(status, "") }

// SetFailBody is SetFailStatus with the body to send; a body starting with
// '{' or '[' goes out as application/json (a provider's JSON-RPC error on a
// 429, say).
func (n *Node) SetFailBody(status int, body string) {
	n.setFault(func(f *faults) { f.failStatus, f.failBody = status, body })
}

// SetRPCError answers every call with this JSON-RPC error; code 0 turns it
// off.
func (n *Node) SetRPCError(code int, msg string) {
	n.SetRPCErrorData(code, msg, nil)
}

// SetRPCErrorData is SetRPCError with error data (raw JSON, nil for none).
func (n *Node) SetRPCErrorData(code int, msg string, data json.RawMessage) {
	var e *jrpc.Error
	if code != 0 {
		e = &jrpc.Error{Code: code, Message: msg, Data: data}
	}
	n.setFault(func(f *faults) { f.rpcErr = e })
}

// SetEcho answers every call with the error fn makes from the request that
// carried it (for WebSocket, the handshake): a provider that repeats the
// caller's URL, key or headers in its errors. fn must be safe for
// concurrent use and must not keep r; nil turns it off.
func (n *Node) SetEcho(fn func(r *http.Request) *jrpc.Error) {
	n.setFault(func(f *faults) { f.echo = fn })
}

// SetChainID makes eth_chainId and net_version report id; 0 reports the
// real one again.
func (n *Node) SetChainID(id uint64) { n.setFault(func(f *faults) { f.chainID = id }) }

// SetMaxLogsRange fails eth_getLogs over more than k blocks; 0 turns it off.
func (n *Node) SetMaxLogsRange(k uint64) { n.setFault(func(f *faults) { f.maxLogs = k }) }

// SetStateWindow makes the node a pruned (full) node that keeps the state
// of its last k blocks only, as geth keeps 128: a state call (eth_getBalance,
// eth_getCode, eth_getStorageAt, eth_getTransactionCount, eth_call,
// eth_estimateGas) at a block more than k below the visible head fails with
// geth's -32000 "missing trie node". Blocks, receipts and logs stay. 0 turns
// it off (an archive node).
func (n *Node) SetStateWindow(k uint64) { n.setFault(func(f *faults) { f.stateKeep = k }) }

// SetMaxLogResults fails eth_getLogs that match more than k logs, as
// MaxLogResults does; 0 turns it off.
func (n *Node) SetMaxLogResults(k int) { n.setFault(func(f *faults) { f.maxResults = k }) }

// SetBogusHead makes the node claim head h while its chain stays where it
// is, as a broken node or a misrouted load balancer does: eth_blockNumber
// answers h, eth_getBlockByNumber("latest") a block h whose parent is
// unknown and whose timestamp is the real head's, and newHeads subscribers
// get that header now and in place of every real one while it lasts.
// Blocks above the real head stay null. 0 turns it off.
func (n *Node) SetBogusHead(h uint64) {
	n.setFault(func(f *faults) { f.bogusHead = h })
	if h == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.subs) > 0 {
		n.notifyHead(n.sortedSubs(), n.bogusBlock(n.view.Load(), h))
	}
}

// bogusSalt makes the bogus head's hashes, which no lookup finds.
const bogusSalt = 0xb0605

// bogusBlock is the block SetBogusHead claims: number h, a parent nobody
// has, the timestamp of the visible head, no transactions.
func (n *Node) bogusBlock(v *chainView, h uint64) *synthBlock {
	return &synthBlock{
		num: h, salt: bogusSalt,
		hash:    n.hash.block(h, bogusSalt),
		parent:  n.hash.block(h-1, bogusSalt),
		time:    n.blockTime(v.visible()),
		baseFee: baseFeeAt(h),
	}
}

// bogus answers the calls SetBogusHead lies about; ok is false for the
// others.
func (n *Node) bogus(v *chainView, h uint64, method string, params []byte) ([]byte, bool) {
	switch method {
	case "eth_blockNumber":
		return quantity(h), true
	case "eth_getBlockByNumber":
		var store [2][]byte
		args, rerr := splitArgs(params, store[:0], 2, 2)
		if rerr != nil || (string(args[0]) != `"latest"` && string(args[0]) != `"pending"`) {
			return nil, false
		}
		return n.appendBlock(nil, n.bogusBlock(v, h), string(args[1]) == "true"), true
	}
	return nil, false
}

// SetDrop closes every connection that sends a request, without answering.
func (n *Node) SetDrop(on bool) { n.setFault(func(f *faults) { f.drop = on }) }

// SetGarbage answers every request with 200 OK and a body that is not JSON.
func (n *Node) SetGarbage(on bool) { n.setFault(func(f *faults) { f.garbage = on }) }

// SetHook installs fn to see every call first; nil removes it.
func (n *Node) SetHook(fn Hook) {
	if fn == nil {
		n.hook.Store(nil)
		return
	}
	n.hook.Store(&fn)
}

// Reset turns every fault off and removes the hook. It leaves the chain
// and the call counts alone.
func (n *Node) Reset() {
	n.setFault(func(f *faults) { *f = faults{} })
	n.hook.Store(nil)
	n.SetLag(0)
}

// delay waits for the configured latency and slow tail. It returns false
// when the wait was cut short by ctx or by Close: then nothing is answered.
func (n *Node) delay(ctx context.Context, f *faults) bool {
	d := f.latency
	if f.slowEvery > 0 && n.slowSeq.Add(1)%f.slowEvery == 0 {
		d += f.slowExtra
	}
	if d <= 0 {
		return true
	}
	if n.opts.Sleep != nil {
		return n.opts.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-n.done:
		return false
	}
}

// count records one call of method ("" for a malformed message).
func (n *Node) count(method string) {
	n.callsMu.RLock()
	c := n.calls[method]
	n.callsMu.RUnlock()
	if c == nil {
		n.callsMu.Lock()
		if c = n.calls[method]; c == nil {
			c = new(atomic.Int64)
			n.calls[method] = c
		}
		n.callsMu.Unlock()
	}
	c.Add(1)
	if strings.IndexByte(method, ' ') < 0 {
		n.total.Add(1)
	}
}

// firstTag is the name a call's params start with: a block tag
// ("latest") or a subscription ("newHeads"), a string of letters only, so
// that the counted keys stay few; "" if none.
func firstTag(params []byte) string {
	p := bytes.TrimSpace(params)
	if len(p) < 2 || p[0] != '[' {
		return ""
	}
	p = bytes.TrimSpace(p[1:])
	if len(p) < 2 || p[0] != '"' {
		return ""
	}
	for i := 1; i < len(p) && i <= maxTagLen+1; i++ {
		switch c := p[i]; {
		case c == '"':
			return string(p[1:i])
		case c < 'A' || c > 'z' || c > 'Z' && c < 'a':
			return ""
		}
	}
	return ""
}

// maxTagLen bounds the names CallsAt counts.
const maxTagLen = 32

// CallsAt is the number of calls of method whose first parameter was the
// string tag since the last ResetCalls: eth_getBlockByNumber("latest"),
// what a head poller sends, told apart from calls for numbered blocks, or
// eth_subscribe("newHeads") from other subscriptions. Only names of
// letters are counted.
func (n *Node) CallsAt(method, tag string) int64 { return n.Calls(method + " " + tag) }

// Calls is the number of calls of method that reached the node since the
// last ResetCalls, whatever they were answered.
func (n *Node) Calls(method string) int64 {
	n.callsMu.RLock()
	defer n.callsMu.RUnlock()
	if c := n.calls[method]; c != nil {
		return c.Load()
	}
	return 0
}

// TotalCalls is the number of calls of any method since the last
// ResetCalls.
func (n *Node) TotalCalls() int64 { return n.total.Load() }

// CallCounts returns the non-zero call counts by method.
func (n *Node) CallCounts() map[string]int64 {
	n.callsMu.RLock()
	defer n.callsMu.RUnlock()
	out := make(map[string]int64, len(n.calls))
	for k, c := range n.calls {
		if v := c.Load(); v != 0 && strings.IndexByte(k, ' ') < 0 {
			out[k] = v
		}
	}
	return out
}

// ResetCalls sets every call count to zero.
func (n *Node) ResetCalls() {
	n.callsMu.Lock()
	defer n.callsMu.Unlock()
	for _, c := range n.calls {
		c.Store(0)
	}
	n.total.Store(0)
}
