package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/relay"
)

// testPollInterval keeps the polling tests quick.
const testPollInterval = 20 * time.Millisecond

// httpPool is a pool over fakenodes reached over HTTP only (no ws url),
// at a path that stands for an API key; the first is primary, the others
// secondary.
func httpPool(t *testing.T, nodes ...*fakenode.Node) *Pool {
	t.Helper()
	rs := make([]Config, len(nodes))
	for i, n := range nodes {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: fmt.Sprintf("%s/key%d", n.URL(), i), Timeout: 2 * time.Second}
		if i > 0 {
			rs[i].Tier = TierSecondary
		}
	}
	return startPool(t, PoolConfig{Breaker: BreakerConfig{Cooldown: 100 * time.Millisecond}, PendingPollInterval: testPollInterval}, rs, nil)
}

// lacking answers method with geth's -32601 for a method it does not have.
func lacking(methods ...string) fakenode.Hook {
	return func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		for _, m := range methods {
			if method == m {
				return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound,
					Message: "the method " + method + " does not exist/is not available"}, true
			}
		}
		return nil, nil, false
	}
}

// With no WebSocket remote, newPendingTransactions comes from one
// pending-transaction filter polled over HTTP on the primary: every
// transaction once, and the filter uninstalled when the relay ends.
func TestRelayPollsPendingFilter(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := httpPool(t, n0, n1)
	if p.Relays() == nil {
		t.Fatal("Relays() = nil for remotes that may serve eth_newPendingTransactionFilter")
	}

	r := startRelay(t, p, `["newPendingTransactions"]`)
	key := hashKey(t)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
	var want []string
	for range 20 {
		want = append(want, sendRaw(t, p))
	}
	r.expectOnce(t, key, want, warm)
	if got := n0.Calls("eth_newPendingTransactionFilter"); got != 1 || n1.Calls("eth_newPendingTransactionFilter") != 0 {
		t.Errorf("filters made: n0 %d, n1 %d; want one, on the primary", got, n1.Calls("eth_newPendingTransactionFilter"))
	}
	if n0.PendingFilters() != 0 || n0.Calls("eth_uninstallFilter") != 1 {
		t.Errorf("after the relay ended: %d filters left, %d uninstalls; want the filter uninstalled",
			n0.PendingFilters(), n0.Calls("eth_uninstallFilter"))
	}
}

// A filter the remote forgot ("filter not found") is made again, and
// polling goes on from the new one.
func TestRelayPollRecreatesForgottenFilter(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := httpPool(t, n)
	r := startRelay(t, p, `["newPendingTransactions"]`)
	key := hashKey(t)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })

	n.DropFilters()
	waitFor(t, "the filter made again", func() bool { return n.Calls("eth_newPendingTransactionFilter") == 2 })
	var want []string
	for range 10 {
		want = append(want, sendRaw(t, p))
	}
	r.expectOnce(t, key, want, warm)
	if n.PendingFilters() != 0 {
		t.Errorf("%d filters left after the relay ended", n.PendingFilters())
	}
}

// A remote without eth_newPendingTransactionFilter is passed over for the
// next one; when no remote has it (and none has a ws url), Relay fails at
// once with relay.ErrUnsupported, and asks no remote again while they are
// known to lack it.
func TestRelayPollMovesOnAndUnsupported(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n0.SetHook(lacking("eth_newPendingTransactionFilter"))
	p := httpPool(t, n0, n1)

	r := startRelay(t, p, `["newPendingTransactions"]`)
	key := hashKey(t)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
	want := []string{sendRaw(t, p), sendRaw(t, p), sendRaw(t, p)}
	r.expectOnce(t, key, want, warm)
	if n0.Calls("eth_newPendingTransactionFilter") != 1 || n1.Calls("eth_newPendingTransactionFilter") != 1 {
		t.Errorf("filters asked: n0 %d, n1 %d; want n0 once, then n1",
			n0.Calls("eth_newPendingTransactionFilter"), n1.Calls("eth_newPendingTransactionFilter"))
	}

	n1.SetHook(lacking("eth_newPendingTransactionFilter"))
	r = startRelay(t, p, `["newPendingTransactions"]`)
	err := r.wait(t)
	if !errors.Is(err, relay.ErrUnsupported) {
		t.Fatalf("Relay where no remote has the filter = %v, want relay.ErrUnsupported", err)
	}
	if msg := err.Error(); strings.Contains(msg, "key0") || strings.Contains(msg, "key1") {
		t.Errorf("error %q shows a remote's url", msg)
	}
	asked := n0.Calls("eth_newPendingTransactionFilter") + n1.Calls("eth_newPendingTransactionFilter")
	r = startRelay(t, p, `["newPendingTransactions"]`)
	if err := r.wait(t); !errors.Is(err, relay.ErrUnsupported) {
		t.Fatalf("Relay again = %v, want relay.ErrUnsupported", err)
	}
	if again := n0.Calls("eth_newPendingTransactionFilter") + n1.Calls("eth_newPendingTransactionFilter"); again != asked {
		t.Errorf("the second Relay asked the remotes %d more times, want none: they are known to lack it", again-asked)
	}
}

// Full transactions from a remote whose filter answers hashes anyway are
// fetched by hash from that remote; every one comes once, as an object.
func TestRelayPollFullTransactionsByHash(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	const from = "0x00000000000000000000000000000000000000f0"
	n.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "eth_getTransactionByHash" {
			return nil, nil, false
		}
		var args []string
		if err := json.Unmarshal(params, &args); err != nil || len(args) != 1 {
			return nil, &jrpc.Error{Code: jrpc.CodeInvalidParams, Message: "bad params"}, true
		}
		return json.RawMessage(`{"blockHash":null,"blockNumber":null,"from":"` + from + `","gas":"0x5208","hash":"` + args[0] +
			`","input":"0x","nonce":"0x7","to":null,"transactionIndex":null,"value":"0x1","type":"0x2"}`), nil, true
	})
	p := httpPool(t, n)
	r := startRelay(t, p, `["newPendingTransactions",true]`)
	key := txKey(t, from)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
	var want []string
	for range 10 {
		want = append(want, sendRaw(t, p))
	}
	r.expectOnce(t, key, want, warm)
}

// Against a real geth over HTTP only: the pending-transaction filter
// delivers every transaction sent, once, as hashes or (geth honours the
// filter's fullTx flag) as full transactions.
func TestRelayPollPendingFromGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	var accounts []string
	if err := json.Unmarshal(g.MustCall(t, "eth_accounts"), &accounts); err != nil || len(accounts) == 0 {
		t.Fatalf("eth_accounts: %v %v", accounts, err)
	}
	dev := accounts[0]
	var nonce uint64 // counted here: see TestRelayPendingFromGeth
	send := func() string {
		var h string
		if err := json.Unmarshal(g.MustCall(t, "eth_sendTransaction", map[string]any{
			"from": dev, "to": "0x00000000000000000000000000000000000000aa", "value": "0x1",
			"nonce": fmt.Sprintf("0x%x", nonce),
		}), &h); err != nil {
			t.Fatal(err)
		}
		nonce++
		return strings.ToLower(h)
	}
	send() // a first block, so that the pool sees a head

	p := startPool(t, PoolConfig{PendingPollInterval: 100 * time.Millisecond},
		[]Config{{Name: "geth", URL: g.HTTPURL(), Timeout: 5 * time.Second}}, nil)
	tests := []struct {
		name string
		give string
		key  func(json.RawMessage) string
	}{
		{name: "hashes", give: `["newPendingTransactions"]`, key: hashKey(t)},
		{name: "full transactions", give: `["newPendingTransactions", true]`, key: txKey(t, dev)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startRelay(t, p, tt.give)
			warm := r.warmUp(t, tt.key, send)
			var want []string
			for range 20 {
				want = append(want, send())
			}
			r.expectOnce(t, tt.key, want, warm)
		})
	}
}

// While the WebSocket remote is out of rotation, pending transactions come
// from a filter on the HTTP remote; once it is back, the relay leaves the
// filter (uninstalled) for its subscription, and every transaction sent
// from then on comes once.
func TestRelayPollYieldsToWebSocket(t *testing.T) {
	ws := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	web := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := startPool(t, PoolConfig{PendingPollInterval: testPollInterval}, []Config{
		{Name: "ws", URL: ws.WSURL() + "key0", Timeout: 2 * time.Second},
		{Name: "web", URL: web.URL() + "/key1", Timeout: 2 * time.Second, Tier: TierSecondary},
	}, nil)
	// Out of rotation (a cordon, which the test lifts when it wants).
	p.members()[0].mb.cordonedUntil.Store(time.Now().Add(time.Hour).UnixNano())

	r := startRelay(t, p, `["newPendingTransactions"]`)
	key := hashKey(t)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
	if web.PendingFilters() != 1 || relays(ws) != 0 {
		t.Fatalf("while the ws remote is out: %d filters on web, %d subscribes on ws; want a filter only",
			web.PendingFilters(), relays(ws))
	}

	p.members()[0].mb.cordonedUntil.Store(0)
	waitFor(t, "the relay on the ws remote's subscription", func() bool { return r.ups.Load() == 2 && web.PendingFilters() == 0 })
	if relays(ws) != 1 {
		t.Errorf("%d subscribes on ws, want 1", relays(ws))
	}
	before := web.Calls("eth_getFilterChanges")
	var want []string
	for range 10 {
		want = append(want, sendRaw(t, p))
	}
	r.expectOnce(t, key, want, warm)
	if after := web.Calls("eth_getFilterChanges"); after != before {
		t.Errorf("the filter was polled %d times after the relay left it", after-before)
	}
}

// The relay and the poller pick their remote through selection: never a
// lagging one, and one past its budget only when no other can. (Which of
// those whose relay failed lately comes last is remotes/relay's.)
func TestRelayPicksThroughSelection(t *testing.T) {
	rs := make([]Config, 3)
	for i := range rs {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: "http://127.0.0.1:1", WSURL: "ws://127.0.0.1:1"}
	}
	rs[1].Budget = budget.Config{Calls: 1, Per: budget.PeriodDay}
	p, err := NewPool(PoolConfig{Chain: "test", MaxLag: 5}, rs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	p.now = func() time.Time { return now }
	heads := []uint64{50, 100, 100}
	for i, r := range p.members() {
		r.cc.Set(health.OK)
		r.head.Store(heads[i])
	}
	n1 := p.members()[1]
	picks := func() map[string]int {
		got := map[string]int{}
		for range 64 {
			u := relayHost{p}.Pick(now, relay.Upstream.CanSubscribe)
			if u == nil {
				t.Fatal("no remote picked")
			}
			got[u.Name()]++
		}
		return got
	}
	if got := picks(); got["n0"] > 0 {
		t.Errorf("picked the lagging n0: %v", got)
	}
	n1.bill("eth_call")
	n1.bill("eth_call")
	p.flushBudgets(context.Background(), now)
	if got := picks(); got["n2"] != 64 {
		t.Errorf("%v, want n2 only while n1 is past its budget", got)
	}
	p.members()[2].cc.Set(health.Wrong)
	if got := picks(); got["n1"] != 64 {
		t.Errorf("%v, want n1, past its budget, when no other can", got)
	}
}
