package remotes

import (
	"fmt"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/wire"
)

// The unsupported-method table stays bounded and keeps learning when full:
// junk method names from clients must not crowd out real ones.
func TestUnsupportedTableBounded(t *testing.T) {
	r := &Remote{unsupported: map[string]unsupportedEntry{}, now: time.Now}
	lacking := &wire.UpstreamError{Remote: "a", Err: &jrpc.Error{Code: -32601, Message: "no such method"}}
	for i := range maxUnsupportedKnown + 100 {
		r.markUnsupported(fmt.Sprintf("junk_%d", i), lacking)
	}
	r.markUnsupported("trace_block", lacking)
	if n := len(r.unsupported); n > maxUnsupportedKnown {
		t.Fatalf("%d entries, want at most %d", n, maxUnsupportedKnown)
	}
	if r.lacks("trace_block") == nil {
		t.Fatal("a full table forgot the newest unsupported method")
	}
}

// Attempts cut by the chain's call deadline, not by the remote's own
// timeout, must not open the breaker of a healthy but slow-for-this-call
// remote: a client's too-short deadline cannot take a chain down.
func TestCallDeadlineIsNotARemoteFault(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{CallDeadline: 40 * time.Millisecond, Breaker: BreakerConfig{Failures: 2}}, []*fakenode.Node{n0}, nil)
	n0.SetLatency(150 * time.Millisecond) // under the remote's 2 s timeout
	for i := range 6 {
		if _, err := call(t, p, "eth_getBalance", fmt.Sprintf(`["0x%040x","latest"]`, i+1)); wireCode(err) != jrpc.CodeTimeout {
			t.Fatalf("call %d: err = %v, want -32051", i, err)
		}
	}
	if st := p.members()[0].brk.State(); st != breaker.Closed {
		t.Fatalf("breaker state %d after deadline cuts, want closed", st)
	}
	if !p.Ready() {
		t.Fatal("pool not ready after calls cut by the caller's deadline")
	}
}
