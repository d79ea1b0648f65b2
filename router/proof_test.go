package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

// storeTwo is the init code of a contract that stores 42 in slot 0 and 7
// in slot 1, with the two-byte runtime code 0x6000.
const storeTwo = "602a600055" + "6007600155" + "616000600052" + "6002601ef3"

// Ways the proxy in front of the simulated node lies.
const (
	honest     = iota
	lieState   // state answers are another node's: balance, nonce, code, slot off
	lieAll     // and its eth_getProof is a proof of another block's state
	noGetProof // honest, but eth_getProof is not served (a provider without it)
)

// provingChain is a real chain (the simulated backend) behind a fake node
// that lies as mode says, the one remote of a router whose cache checks
// proofs.
type provingChain struct {
	sim      *simnode.Node
	proxy    *fakenode.Node
	mode     atomic.Int32
	contract string
	early    string // the hash of a block before the contract
	at       string // the settled block the calls read, a number
	rt       *Router
	reg      *prometheus.Registry
}

func startProvingChain(t *testing.T) *provingChain {
	t.Helper()
	p := &provingChain{sim: simnode.Start(t), reg: prometheus.NewRegistry()}
	p.early = p.sim.Commit().Hex()
	p.contract = strings.ToLower(p.sim.Deploy(t, common.FromHex(storeTwo)).Hex())
	p.sim.Commit()
	head := p.sim.Head(t).Number.Uint64()
	p.at = evm.Quantity(head)
	headHash := p.hashAt(t, head)
	p.proxy = fakenode.Start(t, fakenode.Options{Name: "proxy", ChainID: simnode.ChainID})
	p.proxy.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		mode := p.mode.Load()
		switch {
		case mode == noGetProof && method == "eth_getProof":
			return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method eth_getProof does not exist/is not available"}, true
		case mode == lieAll && method == "eth_getProof":
			// A proof of the same account at the block before the contract.
			params = bytes.Replace(params, []byte(headHash), []byte(p.early), 1)
		case mode == lieState || mode == lieAll:
			switch method {
			case "eth_getBalance", "eth_getTransactionCount":
				return json.RawMessage(`"0xbad"`), nil, true
			case "eth_getCode":
				return json.RawMessage(`"0x60016000"`), nil, true
			case "eth_getStorageAt":
				return json.RawMessage(`"0x00000000000000000000000000000000000000000000000000000000000000ff"`), nil, true
			}
		}
		res, err := rawCall(context.Background(), p.sim.HTTPURL(), method, string(params))
		if je, ok := errors.AsType[*jrpc.Error](err); ok {
			return nil, je, true
		}
		if err != nil {
			return nil, &jrpc.Error{Code: -32000, Message: err.Error()}, true
		}
		return res, nil, true
	})
	pool := startChainPool(t, simnode.ChainID, remotes.Config{Name: "proxy", URL: p.proxy.URL(), Timeout: 5 * time.Second})
	testkit.WaitFor(t, 10*time.Second, "the proxy in rotation", func() bool {
		for _, s := range pool.Status() {
			if s.InRotation && s.Head == head {
				return true
			}
		}
		return false
	})
	c := cache.New(cache.Config{Verify: cache.VerifyProofs}.WithDefaults(time.Second, false),
		cache.Options{Chain: "dev", Metrics: cache.NewMetrics(p.reg)})
	t.Cleanup(c.Close)
	p.rt = New(Config{Chain: "dev", ChainID: simnode.ChainID, Cache: c,
		Settled: func() (uint64, bool) { return head, true }}, nil, upstreamOf(pool), nil)
	return p
}

// hashAt is the simulated chain's hash of block n.
func (p *provingChain) hashAt(t *testing.T, n uint64) string {
	t.Helper()
	var b struct{ Hash string }
	if err := json.Unmarshal(mustCall(t, p.sim.HTTPURL(), "eth_getBlockByNumber", `["`+evm.Quantity(n)+`",false]`), &b); err != nil {
		t.Fatal(err)
	}
	return b.Hash
}

// serve is the router's answer to one call, and whether the cache
// answered it.
func (p *provingChain) serve(method, params string) (json.RawMessage, error, bool) {
	n := &jrpc.Note{}
	ctx := jrpc.WithNote(context.Background(), n)
	res, err := p.rt.ServeRPC(ctx, &jrpc.Request{Method: method, Params: json.RawMessage(params)})
	return res, err, n.Cache == "hit"
}

// checks is venn_cache_proof_checks_total of method and result.
func (p *provingChain) checks(t *testing.T, method, result string) float64 {
	t.Helper()
	v, _ := testkit.Value(t, p.reg, "venn_cache_proof_checks_total", map[string]string{"chain": "dev", "method": method, "result": result})
	return v
}

// TestProofCheckedCacheStoresGethsState: with verify: proofs, each
// provable state call at a settled block is answered as geth answers it,
// stored once its account's proof from the remotes verifies against the
// block's state root, and a hit after.
func TestProofCheckedCacheStoresGethsState(t *testing.T) {
	p := startProvingChain(t)
	from := strings.ToLower(p.sim.From().Hex())
	calls := []call{
		{"eth_getBalance", `["` + from + `","` + p.at + `"]`},
		{"eth_getTransactionCount", `["` + from + `","` + p.at + `"]`},
		{"eth_getCode", `["` + p.contract + `","` + p.at + `"]`},
		{"eth_getStorageAt", `["` + p.contract + `","0x0","` + p.at + `"]`},
		{"eth_getStorageAt", `["` + p.contract + `","0x1","` + p.at + `"]`},
		{"eth_getBalance", `["0x00000000000000000000000000000000000000aa","` + p.at + `"]`},
		{"eth_getProof", `["` + p.contract + `",["0x0","0x01"],"` + p.at + `"]`},
	}
	for _, cl := range calls {
		want := mustCall(t, p.sim.HTTPURL(), cl.method, cl.params)
		for i, wantHit := range []bool{false, true} {
			res, err, hit := p.serve(cl.method, cl.params)
			if err != nil || !bytes.Equal(res, want) || hit != wantHit {
				t.Fatalf("%s%s #%d: %s %v (hit %v), want geth's %s (hit %v)", cl.method, cl.params, i, res, err, hit, want, wantHit)
			}
		}
	}
	for _, m := range []string{"eth_getBalance", "eth_getTransactionCount", "eth_getCode", "eth_getStorageAt", "eth_getProof"} {
		want := map[string]float64{"eth_getBalance": 2, "eth_getStorageAt": 2}[m]
		if want == 0 {
			want = 1
		}
		if n := p.checks(t, m, "verified"); n != want {
			t.Errorf("%s: %v verified proofs, want %v", m, n, want)
		}
	}
}

// TestProofCheckedCacheNeverStoresALie: the one remote answers state that
// is not its block's. Its answers are never stored: the client gets the
// state the proof proves (balance, nonce, slot), or an error (code, whose
// proof holds only a hash), never the lie, and the next call asks again.
// When its proofs lie too (another block's), nothing verifies, and
// nothing is stored either; once it answers truly, the answers are stored
// and served from the cache, the truth even while it lies again.
func TestProofCheckedCacheNeverStoresALie(t *testing.T) {
	p := startProvingChain(t)
	from := strings.ToLower(p.sim.From().Hex())
	balance := call{"eth_getBalance", `["` + from + `","` + p.at + `"]`}
	nonce := call{"eth_getTransactionCount", `["` + from + `","` + p.at + `"]`}
	slot := call{"eth_getStorageAt", `["` + p.contract + `","0x0","` + p.at + `"]`}
	code := call{"eth_getCode", `["` + p.contract + `","` + p.at + `"]`}
	truth := map[call]json.RawMessage{}
	for _, cl := range []call{balance, nonce, slot, code} {
		truth[cl] = mustCall(t, p.sim.HTTPURL(), cl.method, cl.params)
	}

	p.mode.Store(lieState)
	for i := range 2 {
		for _, cl := range []call{balance, nonce, slot} {
			res, err, hit := p.serve(cl.method, cl.params)
			if err != nil || !bytes.Equal(res, truth[cl]) || hit {
				t.Fatalf("%s #%d from a lying remote: %s %v (hit %v), want the proven %s, not from the cache", cl.method, i, res, err, hit, truth[cl])
			}
		}
		_, err, _ := p.serve(code.method, code.params)
		if je := jrpc.ToWire(err); je == nil || je.Code != jrpc.CodeNoRemote {
			t.Fatalf("eth_getCode #%d from a lying remote: %v, want -32050", i, err)
		}
	}
	if n := p.checks(t, "eth_getBalance", "mismatch"); n != 2 {
		t.Errorf("%v balance mismatches counted, want 2", n)
	}

	p.mode.Store(lieAll)
	for _, cl := range []call{balance, code} {
		_, _, hit := p.serve(cl.method, cl.params)
		if hit {
			t.Fatalf("%s: a hit after a lie with a false proof", cl.method)
		}
	}
	if n := p.checks(t, "eth_getBalance", "bad_proof"); n != 1 {
		t.Errorf("%v bad balance proofs counted, want 1", n)
	}

	p.mode.Store(honest)
	for _, cl := range []call{balance, nonce, slot, code} {
		if res, err, _ := p.serve(cl.method, cl.params); err != nil || !bytes.Equal(res, truth[cl]) {
			t.Fatalf("%s from an honest remote: %s %v", cl.method, res, err)
		}
	}
	p.mode.Store(lieAll)
	for _, cl := range []call{balance, nonce, slot, code} {
		res, err, hit := p.serve(cl.method, cl.params)
		if err != nil || !bytes.Equal(res, truth[cl]) || !hit {
			t.Fatalf("%s stored while the remote was honest: %s %v (hit %v), want %s from the cache", cl.method, res, err, hit, truth[cl])
		}
	}
}

// TestProofCheckedCacheWithoutGetProof: a remote that does not serve
// eth_getProof leaves every provable answer unstored (no_proof), served
// as it came: the cache is then only a pass-through for them.
func TestProofCheckedCacheWithoutGetProof(t *testing.T) {
	p := startProvingChain(t)
	p.mode.Store(noGetProof)
	cl := call{"eth_getBalance", `["` + strings.ToLower(p.sim.From().Hex()) + `","` + p.at + `"]`}
	want := mustCall(t, p.sim.HTTPURL(), cl.method, cl.params)
	for i := range 2 {
		res, err, hit := p.serve(cl.method, cl.params)
		if err != nil || !bytes.Equal(res, want) || hit {
			t.Fatalf("#%d: %s %v (hit %v), want geth's %s, not from the cache", i, res, err, hit, want)
		}
	}
	if n := p.checks(t, "eth_getBalance", "no_proof"); n != 2 {
		t.Errorf("%v calls without a proof counted, want 2", n)
	}
}
