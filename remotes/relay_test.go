package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/relay"
	"github.com/venn-gateway/venn/remotes/settings"
	"github.com/venn-gateway/venn/remotes/wire"
)

// relayWait bounds every wait of the relay tests: geth on a loaded
// two-core machine can take seconds to answer.
const relayWait = 20 * time.Second

// relayRun is one Relays.Relay running in the background, collecting what
// it delivers.
type relayRun struct {
	cancel context.CancelFunc
	done   chan error
	ups    atomic.Int64 // how often the upstream subscription was in place

	mu  sync.Mutex
	got []json.RawMessage
}

// startRelay runs Relays.Relay(params) on p until the test ends or stop is called.
func startRelay(t *testing.T, p *Pool, params string) *relayRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &relayRun{cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- p.relays.Relay(ctx, json.RawMessage(params), func() { r.ups.Add(1) }, func(res json.RawMessage) {
			r.mu.Lock()
			r.got = append(r.got, res)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		r.done <- nil // for a later wait
	})
	return r
}

func (r *relayRun) results() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage(nil), r.got...)
}

// wait returns Relay's error once it has returned.
func (r *relayRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(relayWait):
		t.Fatalf("Relay did not return within %v", relayWait)
		return nil
	}
}

// stop cancels the relay and checks it returned the context's error.
func (r *relayRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := r.wait(t); err != context.Canceled {
		t.Errorf("Relay after cancel = %v, want exactly context.Canceled", err)
	}
}

// warmUp sends transactions until one of them is relayed, so that the
// subscription is known to be live, and returns the hashes it sent.
func (r *relayRun) warmUp(t *testing.T, key func(json.RawMessage) string, send func() string) map[string]bool {
	t.Helper()
	sent := map[string]bool{}
	deadline := time.Now().Add(relayWait)
	for time.Now().Before(deadline) {
		sent[send()] = true
		wait := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(wait) {
			for _, res := range r.results() {
				if sent[key(res)] {
					return sent
				}
			}
			select {
			case err := <-r.done:
				r.done <- err
				t.Fatalf("Relay returned before relaying anything: %v", err)
			default:
			}
			time.Sleep(5 * time.Millisecond) // polling for a delivery with a deadline
		}
	}
	t.Fatalf("no transaction relayed within %v", relayWait)
	return nil
}

// expectOnce waits until every hash in want was delivered, then checks that
// each was delivered once and that nothing but sent (want and the warm-up)
// came.
func (r *relayRun) expectOnce(t *testing.T, key func(json.RawMessage) string, want []string, warm map[string]bool) {
	t.Helper()
	count := func() map[string]int {
		n := map[string]int{}
		for _, res := range r.results() {
			n[key(res)]++
		}
		return n
	}
	deadline := time.Now().Add(relayWait)
	for {
		n, missing := count(), 0
		for _, h := range want {
			if n[h] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d transactions not relayed within %v", missing, len(want), relayWait)
		}
		time.Sleep(10 * time.Millisecond) // polling for deliveries with a deadline
	}
	r.stop(t)
	n := count()
	for _, h := range want {
		if n[h] != 1 {
			t.Errorf("transaction %s relayed %d times, want once", h, n[h])
		}
		delete(n, h)
	}
	for h, c := range n {
		switch {
		case !warm[h]:
			t.Errorf("relayed %s (%d times), which was never sent", h, c)
		case c > 1:
			t.Errorf("warm-up transaction %s relayed %d times", h, c)
		}
	}
}

// relayGoroutines counts the goroutines of relay sessions: those running
// remotes/relay's from, and those of a subscription session
// (wire.Subscription) started by one of them or by a goroutine gone, a
// session that outlived its owner.
// The sessions of the pool's own newHeads followers are not relays.
func relayGoroutines() int {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := make(map[string]string) // by goroutine id
	for _, g := range strings.Split(string(buf), "\n\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(g, "goroutine "), " "); ok {
			stacks[id] = g
		}
	}
	const relayFn, session = "relay.from(", "wire.(*Subscription)."
	c := 0
	for _, g := range stacks {
		switch {
		case strings.Contains(g, relayFn):
			c++
		case strings.Contains(g, session):
			_, by, _ := strings.Cut(g, "\ncreated by ")
			_, creator, _ := strings.Cut(by, " in goroutine ")
			creator, _, _ = strings.Cut(creator, "\n")
			if s, alive := stacks[creator]; !alive || strings.Contains(s, relayFn) {
				c++
			}
		}
	}
	return c
}

// hashKey reads a newPendingTransactions result: a quoted hash.
func hashKey(t *testing.T) func(json.RawMessage) string {
	return func(res json.RawMessage) string {
		var h string
		if err := json.Unmarshal(res, &h); err != nil || len(h) != 66 {
			t.Errorf("relayed %s, want a transaction hash", res)
		}
		return strings.ToLower(h)
	}
}

// txKey reads a newPendingTransactions result with full transactions: the
// transaction object, sent by from.
func txKey(t *testing.T, from string) func(json.RawMessage) string {
	return func(res json.RawMessage) string {
		var tx struct {
			Hash, From, To, Nonce, Gas, Value, Input, Type string
		}
		if err := json.Unmarshal(res, &tx); err != nil {
			t.Errorf("relayed %s, want a transaction object", res)
		}
		if len(tx.Hash) != 66 || !strings.EqualFold(tx.From, from) || tx.Nonce == "" || tx.Gas == "" || tx.Input == "" || tx.Type == "" {
			t.Errorf("relayed %s, want a full transaction sent by %s", res, from)
		}
		return strings.ToLower(tx.Hash)
	}
}

// Against a real geth: newPendingTransactions through Relays.Relay delivers
// every transaction sent, once, as hashes or as full transactions; geth
// --dev mines each one at once, and the notification still comes.
func TestRelayPendingFromGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{}) // mines when a transaction arrives
	var accounts []string
	if err := json.Unmarshal(g.MustCall(t, "eth_accounts"), &accounts); err != nil || len(accounts) == 0 {
		t.Fatalf("eth_accounts: %v %v", accounts, err)
	}
	dev := accounts[0]
	// Nonces are counted here: geth --dev mines each transaction at once,
	// and a nonce it reads back from its pool in between can repeat one
	// (an identical transaction: "already known").
	var nonce uint64
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

	p := startPool(t, PoolConfig{}, []Config{{Name: "geth", URL: g.HTTPURL(), WSURL: g.WSURL(), Timeout: 5 * time.Second}}, nil)
	if p.Relays() == nil {
		t.Fatal("Relays() = nil with a ws url")
	}
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
			if n := relayGoroutines(); n != 2 {
				t.Errorf("%d relay goroutines while relaying, want 2 (reader and pinger)", n)
			}
			var want []string
			for range 20 {
				want = append(want, send())
			}
			r.expectOnce(t, tt.key, want, warm)
			if n := relayGoroutines(); n != 0 {
				t.Errorf("%d relay goroutines after Relay returned", n)
			}
		})
	}
}

// relayPool is a pool over fakenodes reached over WebSocket at a path that
// stands for an API key (/key0, /key1, ...); the first is primary, the
// others secondary.
// relays counts n's newPendingTransactions subscribes (the pool's own
// newHeads subscribes are not relays).
func relays(n *fakenode.Node) int64 { return n.CallsAt("eth_subscribe", "newPendingTransactions") }

func relayPool(t *testing.T, nodes ...*fakenode.Node) *Pool {
	t.Helper()
	return relayPoolWith(t, nil, nodes...)
}

// relayPoolWith is relayPool with before called on the pool before it
// starts (startPoolWith).
func relayPoolWith(t *testing.T, before func(*Pool), nodes ...*fakenode.Node) *Pool {
	t.Helper()
	rs := make([]Config, len(nodes))
	for i, n := range nodes {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: fmt.Sprintf("%skey%d", n.WSURL(), i), Timeout: testTimeout}
		if i > 0 {
			rs[i].Tier = TierSecondary
		}
	}
	return startPoolWith(t, PoolConfig{Breaker: BreakerConfig{Cooldown: 100 * time.Millisecond}}, rs, nil, before)
}

// sendRaw sends a new transaction through the pool (to every remote) and
// returns its hash.
func sendRaw(t *testing.T, p *Pool) string {
	t.Helper()
	params, hash := signedTx(t)
	if _, err := call(t, p, "eth_sendRawTransaction", params); err != nil {
		t.Fatal(err)
	}
	return strings.ToLower(strings.Trim(hash, `"`))
}

// A remote that refuses the subscription ends the attempt with its error,
// and the next attempt goes to another remote rather than back to it.
func TestRelayMovesOnAfterSubscribeError(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	const refusal = "subscription service unavailable"
	n0.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_subscribe" && strings.Contains(string(params), "newPendingTransactions") {
			return nil, &jrpc.Error{Code: jrpc.CodeInternal, Message: refusal}, true
		}
		return nil, nil, false
	})
	p := relayPool(t, n0, n1)

	r := startRelay(t, p, `["newPendingTransactions"]`)
	err := r.wait(t)
	var ue *wire.UpstreamError
	if !errors.As(err, &ue) || ue.Err.Code != jrpc.CodeInternal || ue.Remote != "n0" {
		t.Fatalf("Relay on a refusing remote = %v, want n0's -32603", err)
	}
	if msg := err.Error(); !strings.Contains(msg, refusal) || !strings.Contains(msg, "n0") || strings.Contains(msg, "key0") {
		t.Errorf("error %q: want the remote's name and its refusal, never its url", msg)
	}
	if relays(n0) != 1 || relays(n1) != 0 {
		t.Fatalf("subscribes: n0 %d, n1 %d; want the primary asked first", relays(n0), relays(n1))
	}

	r = startRelay(t, p, `["newPendingTransactions"]`)
	key := hashKey(t)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
	var want []string
	for range 10 {
		want = append(want, sendRaw(t, p))
	}
	r.expectOnce(t, key, want, warm)
	if relays(n0) != 1 || relays(n1) != 1 {
		t.Errorf("subscribes: n0 %d, n1 %d; want the retry on n1", relays(n0), relays(n1))
	}
}

// A remote that has no such subscription (geth's -32601 "no ...
// subscription in eth namespace") is passed over within the same Relay,
// and is not asked again while that is remembered.
func TestRelaySkipsRemoteWithoutSubscription(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n0.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_subscribe" && strings.Contains(string(params), "newPendingTransactions") {
			return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: `no "newPendingTransactions" subscription in eth namespace`}, true
		}
		return nil, nil, false
	})
	p := relayPool(t, n0, n1)
	key := hashKey(t)
	for round := range 2 {
		r := startRelay(t, p, `["newPendingTransactions"]`)
		warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
		want := []string{sendRaw(t, p), sendRaw(t, p)}
		r.expectOnce(t, key, want, warm)
		if relays(n0) != 1 || relays(n1) != int64(round+1) {
			t.Errorf("round %d: subscribes n0 %d, n1 %d; want n0 once, n1 every round", round, relays(n0), relays(n1))
		}
	}
	if n0.Calls("eth_newPendingTransactionFilter")+n1.Calls("eth_newPendingTransactionFilter") != 0 {
		t.Error("a filter was made while a WebSocket remote could relay")
	}
}

// With one WebSocket remote that has neither the subscription nor the
// filter, the first Relay fails with relay.ErrUnsupported, and the next
// asks nothing.
func TestRelayUnsupportedEverywhere(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_subscribe" && strings.Contains(string(params), "newPendingTransactions") {
			return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: `no "newPendingTransactions" subscription in eth namespace`}, true
		}
		return lacking("eth_newPendingTransactionFilter")(method, params)
	})
	p := relayPool(t, n)
	for i := range 2 {
		r := startRelay(t, p, `["newPendingTransactions"]`)
		if err := r.wait(t); !errors.Is(err, relay.ErrUnsupported) {
			t.Fatalf("Relay %d = %v, want relay.ErrUnsupported", i, err)
		}
	}
	if relays(n) != 1 || n.Calls("eth_newPendingTransactionFilter") != 1 {
		t.Errorf("asked %d subscribes, %d filters; want each once", relays(n), n.Calls("eth_newPendingTransactionFilter"))
	}
}

// A remote that keeps refusing, with no other to go to (and no filter),
// is tried again only after a backoff, not at every retry. The backoff is
// on the pool's clock, which is the test's: a busy machine cannot make it
// pass before the retry.
func TestRelayBacksOff(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_subscribe" {
			return nil, &jrpc.Error{Code: jrpc.CodeInternal, Message: "subscriptions are down"}, true
		}
		return lacking("eth_newPendingTransactionFilter")(method, params)
	})
	clock := newTestClock()
	p := relayPoolWith(t, clock.use, n)
	try := func(ctx context.Context) error {
		return p.relays.Relay(ctx, json.RawMessage(`["newPendingTransactions"]`), func() {}, func(json.RawMessage) {})
	}

	if err := try(context.Background()); err == nil {
		t.Fatal("Relay on a refusing remote succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := try(ctx)
	cancel()
	if err != context.DeadlineExceeded || relays(n) != 1 {
		t.Errorf("retry within the backoff: %v after %d subscribes, want it waiting and 1", err, relays(n))
	}

	// Alone, the remote is still tried again once the backoff is over.
	clock.add(time.Second) // the relay's first backoff
	if err := try(context.Background()); err == nil || relays(n) != 2 {
		t.Errorf("retry after the backoff: %v after %d subscribes, want its refusal and 2", err, relays(n))
	}
}

// A remote that drops the connection ends Relay with an error naming it,
// never the key in its url, and leaves no goroutine behind; the next
// attempt, on the same remote when it is the only one, relays again.
func TestRelayRemoteDrops(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	clock := newTestClock()
	p := relayPoolWith(t, clock.use, n)
	key := hashKey(t)
	checkErr := func(what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("%s: Relay = %v, want the remote's failure", what, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "n0") || strings.Contains(msg, "key0") {
			t.Errorf("%s: error %q: want the remote's name, never its url", what, msg)
		}
		t.Logf("%s: %v", what, err)
	}

	r := startRelay(t, p, `["newPendingTransactions"]`)
	r.warmUp(t, key, func() string { return sendRaw(t, p) })
	n.SetDown(true)
	err := r.wait(t)
	checkErr("connection dropped", err)
	if !errors.Is(err, wire.ErrTransport) {
		t.Errorf("connection dropped: %v, want wire.ErrTransport", err)
	}
	if g := relayGoroutines(); g != 0 {
		t.Errorf("%d relay goroutines after Relay returned", g)
	}

	// While the remote is down, a dial fails the same way.
	sub, err := relayRemote{p.members()[0]}.Subscribe(json.RawMessage(`["newPendingTransactions"]`), 1<<20, wire.SubHooks{
		Subscribed: func() {}, Refused: func(error) {},
		Result: func(json.RawMessage) { t.Error("delivered from a remote that is down") },
	})
	if err == nil {
		_, err = sub.Run(context.Background())
	}
	checkErr("dial while down", err)

	// The pool's own connection to the remote was cut too, and its reader
	// may not have learnt of it yet: the first call after the remote is
	// back (sendRaw's) is still answered, the transport sending it on a
	// new connection.
	n.SetDown(false)
	// Past its relay backoff, so that the relay goes to it at once, not
	// to a filter first.
	clock.add(time.Second)
	waitFor(t, "the remote back in rotation", func() bool { return p.members()[0].healthy(p.now()) })
	r = startRelay(t, p, `["newPendingTransactions"]`)
	warm := r.warmUp(t, key, func() string { return sendRaw(t, p) })
	want := []string{sendRaw(t, p), sendRaw(t, p)}
	r.expectOnce(t, key, want, warm)
}

// Relays needs a WebSocket url (the remote's ws url or a ws main url),
// or a remote that may serve pending-transaction filters. Without either,
// Relay fails at once, with relay.ErrUnsupported.
func TestRelays(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want bool
	}{
		{name: "http only", give: Config{URL: "http://127.0.0.1:1/key"}, want: true},
		{name: "http only, filters denied", give: Config{URL: "http://127.0.0.1:1/key", Methods: settings.MethodFilter{Deny: []string{"eth_newPendingTransactionFilter"}}}},
		{name: "http only, filters not allowed", give: Config{URL: "http://127.0.0.1:1/key", Methods: settings.MethodFilter{Allow: []string{"eth_call"}}}},
		{name: "ws url", give: Config{URL: "http://127.0.0.1:1/key", WSURL: "ws://127.0.0.1:1/key"}, want: true},
		{name: "ws main url", give: Config{URL: "WSS://127.0.0.1:1/key"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.give.Name = "n0"
			p, err := NewPool(PoolConfig{Chain: "test", ChainID: testChainID}, []Config{tt.give}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Relays() != nil; got != tt.want {
				t.Errorf("Relays() != nil is %v, want %v", got, tt.want)
			}
			if !tt.want {
				err := p.relays.Relay(context.Background(), json.RawMessage(`["newPendingTransactions"]`), func() {}, func(json.RawMessage) {})
				if !errors.Is(err, relay.ErrUnsupported) || strings.Contains(err.Error(), "key") {
					t.Errorf("Relay without a ws url or filters = %v, want relay.ErrUnsupported, without the url", err)
				}
			}
		})
	}
}
