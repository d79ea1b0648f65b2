package stalker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/remotes"
)

// lyingProxy fronts geth and lets lie rewrite the result of each call it
// forwards (lie returns nil to leave it alone). It counts the answers lie
// changed.
type lyingProxy struct {
	*httptest.Server
	lies atomic.Int64
}

func newLyingProxy(t *testing.T, upstream string, lie func(method string, result json.RawMessage) json.RawMessage) *lyingProxy {
	t.Helper()
	p := &lyingProxy{}
	client := &http.Client{Timeout: 10 * time.Second}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		resp, err := client.Post(upstream, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var reply map[string]json.RawMessage
		if json.Unmarshal(out, &reply) == nil && reply["result"] != nil {
			if changed := lie(req.Method, reply["result"]); changed != nil {
				p.lies.Add(1)
				reply["result"] = changed
				out, _ = json.Marshal(reply)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(func() {
		p.Close()
		client.CloseIdleConnections()
	})
	return p
}

// gethTransfers mines n transfers on geth --dev, one block each.
func gethTransfers(t *testing.T, g *gethtest.Geth, n int) {
	t.Helper()
	var accounts []string
	if err := json.Unmarshal(g.MustCall(t, "eth_accounts"), &accounts); err != nil || len(accounts) == 0 {
		t.Fatalf("geth --dev accounts: %v", err)
	}
	for i := range n {
		var hash string
		if err := json.Unmarshal(g.MustCall(t, "eth_sendTransaction", map[string]any{
			"from": accounts[0], "to": accounts[0], "value": "0x" + strconv.FormatInt(int64(i+1), 16),
		}), &hash); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			raw, err := g.Call(context.Background(), "eth_getTransactionReceipt", hash)
			if err == nil && string(raw) != "null" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("transfer %d not mined", i)
			}
			time.Sleep(20 * time.Millisecond) // polling geth for the receipt, with a deadline
		}
	}
}

// editResult decodes a result, lets fn change it and encodes it again; nil
// when fn changed nothing.
func editResult[T any](raw json.RawMessage, fn func(T) bool) json.RawMessage {
	var v T
	if json.Unmarshal(raw, &v) != nil || !fn(v) {
		return nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}

// TestStalkerRefetchesWhatALiarServes leads a chain over two remotes in
// front of one real geth: "liar", asked first, rewrites what it forwards;
// "honest" does not. Every block in the window must be geth's, byte for
// byte, and the liar must be charged with the check it failed.
func TestStalkerRefetchesWhatALiarServes(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	gethTransfers(t, g, 10)

	tests := []struct {
		name  string
		lie   func(method string, res json.RawMessage) json.RawMessage
		check string
	}{
		{name: "a transaction's value", check: "transaction_hash", lie: func(method string, res json.RawMessage) json.RawMessage {
			if method != "eth_getBlockByNumber" && method != "eth_getBlockByHash" {
				return nil
			}
			return editResult(res, func(b map[string]any) bool {
				txs, _ := b["transactions"].([]any)
				if len(txs) == 0 {
					return false
				}
				tx, ok := txs[0].(map[string]any)
				if ok {
					tx["value"] = "0xde0b6b3a7640000"
				}
				return ok
			})
		}},
		{name: "the state root", check: "block_hash", lie: func(method string, res json.RawMessage) json.RawMessage {
			if method != "eth_getBlockByNumber" {
				return nil
			}
			return editResult(res, func(b map[string]any) bool {
				b["stateRoot"] = "0x" + fmt.Sprintf("%064x", 0xbad)
				return true
			})
		}},
		{name: "a receipt's status", check: "receipts_root", lie: func(method string, res json.RawMessage) json.RawMessage {
			if method != "eth_getBlockReceipts" {
				return nil
			}
			return editResult(res, func(rs []map[string]any) bool {
				if len(rs) == 0 {
					return false
				}
				rs[0]["status"] = "0x0"
				return true
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			liar := newLyingProxy(t, g.HTTPURL(), tt.lie)
			reg := prometheus.NewRegistry()
			pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "test", ChainID: gethtest.ChainID,
				BlockTime: 50 * time.Millisecond, CallDeadline: 5 * time.Second}, []remotes.Config{
				{Name: "liar", URL: liar.URL, Timeout: 2 * time.Second},
				{Name: "honest", URL: g.HTTPURL(), Timeout: 2 * time.Second, Tier: remotes.TierSecondary},
			}, nil, remotes.NewMetrics(reg))
			if err != nil {
				t.Fatal(err)
			}
			if err := pool.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			const window = 8
			store, w := headstore.NewMemory(window), headstore.NewWindow(window)
			// The pool without its hedge (unhedged): on a busy machine
			// the honest remote's hedged answer can win every race and the
			// liar's answers are dropped unchecked, never charged. Hedged
			// fetches have their own test (hedge_test.go).
			up := unhedged{pool}
			st := New(Config{Chain: "test", HeadConfig: HeadConfig{Window: window}, Integrity: true}, up, pool.Heads(), store, nil, nil)
			fol := headstore.NewFollower("test", store, w, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { st.Lead(ctx, headstore.MemoryEpoch) })
			wg.Go(func() { fol.Run(ctx) })
			t.Cleanup(func() {
				cancel()
				wg.Wait()
				_ = pool.Stop(context.Background())
			})

			waitForGethHead(t, g, w, window)
			for _, b := range w.Blocks() {
				want := g.MustCall(t, "eth_getBlockByNumber", evm.Quantity(b.Number), true)
				if !bytes.Equal(bytes.TrimSpace(b.Raw), bytes.TrimSpace(want)) {
					t.Errorf("block %d is not geth's:\n got %.300s\nwant %.300s", b.Number, b.Raw, want)
				}
				wantRcs := g.MustCall(t, "eth_getBlockReceipts", b.Hash)
				if !bytes.Equal(bytes.TrimSpace(b.Receipts), bytes.TrimSpace(wantRcs)) {
					t.Errorf("receipts of %d are not geth's:\n got %.300s\nwant %.300s", b.Number, b.Receipts, wantRcs)
				}
			}
			if liar.lies.Load() == 0 {
				t.Fatal("the liar told no lie: the test proves nothing")
			}
			if got := counter(t, reg, "venn_integrity_failures_total", map[string]string{"remote": "liar", "check": tt.check}); got < 1 {
				t.Errorf("venn_integrity_failures_total{remote=liar,check=%s} = %v", tt.check, got)
			}
			if got := counter(t, reg, "venn_integrity_failures_total", map[string]string{"remote": "honest"}); got != 0 {
				t.Errorf("the honest remote was charged %v times", got)
			}
			if got := counter(t, reg, "venn_remote_misbehaviour_total", map[string]string{"remote": "liar", "kind": "integrity"}); got < 1 {
				t.Errorf("liar's integrity misbehaviours = %v", got)
			}
		})
	}
}

// waitForGethHead waits until w holds size blocks up to geth's head as it
// is now. Not the head the transfers reached: geth --dev seals an empty
// block of its own now and then, on a busy machine even after the last
// transfer's receipt, and then that head is never the window's again.
func waitForGethHead(t *testing.T, g *gethtest.Geth, w *headstore.Window, size int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		changed := w.Changed()
		bs := w.Blocks()
		var head string
		if err := json.Unmarshal(g.MustCall(t, "eth_blockNumber"), &head); err != nil {
			t.Fatal(err)
		}
		want, err := evm.ParseQuantity(head)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) == size && bs[len(bs)-1].Number == want {
			return
		}
		if time.Now().After(deadline) {
			top := uint64(0)
			if len(bs) > 0 {
				top = bs[len(bs)-1].Number
			}
			t.Fatalf("window holds %d blocks up to %d, never reached geth's head %d", len(bs), top, want)
		}
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond): // geth's head may have moved
		}
	}
}

// counter sums the series of a counter whose labels include want.
func counter(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	v, _ := testkit.Value(t, reg, name, want)
	return v
}

// unhedged is a pool whose verified calls are never hedged.
type unhedged struct{ *remotes.Pool }

func (u unhedged) CallVerified(ctx context.Context, method string, params json.RawMessage,
	verify func(json.RawMessage) integrity.Verdict, _ time.Duration) (json.RawMessage, integrity.Verdict, error) {
	return u.Pool.CallVerified(ctx, method, params, verify, 0)
}
