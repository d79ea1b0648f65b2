package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// unsupportedErr is what a Relay says when no remote serves the
// subscription (relay.ErrUnsupported of remotes/relay is one).
type unsupportedErr struct{}

func (unsupportedErr) Error() string          { return "no remote serves this subscription" }
func (unsupportedErr) RelayUnsupported() bool { return true }

// fakeRelay is a Relay run by the test: each Relay call waits for the test
// to say how it goes (a script entry), then does it.
type fakeRelay struct {
	calls atomic.Int64
	// script gives each call what to do: up and deliver results, or
	// return an error, or (nil) block until ctx ends.
	script chan relayTurn
}

type relayTurn struct {
	err     error             // returned at once when set
	results []json.RawMessage // delivered after up
	hold    bool              // after delivering, block until ctx ends
}

func newFakeRelay() *fakeRelay { return &fakeRelay{script: make(chan relayTurn, 16)} }

func (f *fakeRelay) Relay(ctx context.Context, _ json.RawMessage, up func(), fn func(json.RawMessage)) error {
	f.calls.Add(1)
	var turn relayTurn
	select {
	case turn = <-f.script:
	case <-ctx.Done():
		return ctx.Err()
	}
	if turn.err != nil {
		return turn.err
	}
	up()
	for _, r := range turn.results {
		fn(r)
	}
	if turn.hold {
		<-ctx.Done()
		return ctx.Err()
	}
	return errors.New("upstream dropped")
}

func startRelayCenter(t *testing.T, relay Relay, opts Options) *Center {
	t.Helper()
	f := newFeed(t, 16)
	f.extend("a", 1, 2, "a")
	c := New("test", f.w, relay, opts, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitView(t, c, 2) // Run has begun: relays end with it
	return c
}

// waitRelaySubs waits until the relay group of params has n subscribers.
func waitRelaySubs(t *testing.T, c *Center, params string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		got := 0
		if g := c.pending[params]; g != nil {
			got = len(g.subs)
		}
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay group %s has %d subscribers, want %d", params, got, n)
		}
		time.Sleep(time.Millisecond) // a poll interval
	}
}

func txHash(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`"0x%064x"`, i)) }

// When no remote serves newPendingTransactions (the relay says so before
// anything was subscribed), eth_subscribe gets -32601, and the next
// eth_subscribe asks the relay again.
func TestPendingRefusedWhenNoRemoteServesIt(t *testing.T) {
	relay := newFakeRelay()
	c := startRelayCenter(t, relay, Options{})
	n := newNotifier()
	for i := range 2 {
		relay.script <- relayTurn{err: fmt.Errorf("chain test: relay: %w", unsupportedErr{})}
		_, err := c.Subscribe(ctxFor(n), json.RawMessage(`["newPendingTransactions"]`))
		if !isRPCError(err, -32601, "newPendingTransactions") {
			t.Fatalf("subscribe %d: %v, want -32601", i, err)
		}
		if got := relay.calls.Load(); got != int64(i+1) {
			t.Fatalf("subscribe %d: %d relay calls, want %d", i, got, i+1)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) != 0 || len(c.conns[n].subs) != 0 {
		t.Errorf("after refusals: %d relay groups, %d subscriptions; want none", len(c.pending), len(c.conns[n].subs))
	}
}

// Subscribers of newPendingTransactions share one upstream subscription,
// and each gets every transaction once, even when the upstream sends one
// again (a remade filter, another remote).
func TestPendingSharedAndOnce(t *testing.T) {
	relay := newFakeRelay()
	c := startRelayCenter(t, relay, Options{})

	a, b := newNotifier(), newNotifier()
	var wg sync.WaitGroup
	for _, n := range []*notifier{a, b} {
		wg.Go(func() { subscribe(t, c, n, `["newPendingTransactions"]`) })
	}
	// The upstream sends only once both have joined: a subscriber that
	// comes later misses what was sent before it, as from any node.
	waitRelaySubs(t, c, `["newPendingTransactions"]`, 2)
	relay.script <- relayTurn{results: []json.RawMessage{txHash(1), txHash(2), txHash(1)}}
	relay.script <- relayTurn{results: []json.RawMessage{txHash(2), txHash(3),
		json.RawMessage(`{"hash":` + string(txHash(3)) + `,"nonce":"0x1"}`)}, hold: true}
	wg.Wait()
	for _, n := range []*notifier{a, b} {
		got := n.collect(t, 3)
		for i, x := range got {
			if want := string(txHash(i + 1)); x.result != want {
				t.Errorf("notification %d = %s, want %s", i, x.result, want)
			}
		}
		n.quiet(t)
	}
	if relay.calls.Load() != 2 {
		t.Errorf("%d relay calls, want 2 (one shared upstream, resubscribed once)", relay.calls.Load())
	}
}

// An upstream that takes long to start does not hold eth_subscribe past
// RelayStartWait: the subscription is accepted and its transactions come
// once the upstream is there.
func TestPendingAcceptedWhileUpstreamStarts(t *testing.T) {
	relay := newFakeRelay()
	c := startRelayCenter(t, relay, Options{RelayStartWait: 50 * time.Millisecond})
	n := newNotifier()
	subscribe(t, c, n, `["newPendingTransactions"]`)
	relay.script <- relayTurn{err: fmt.Errorf("relay: %w", unsupportedErr{})} // after a yes: retried
	relay.script <- relayTurn{results: []json.RawMessage{txHash(7)}, hold: true}
	if got := n.collect(t, 1); got[0].result != string(txHash(7)) {
		t.Errorf("got %v, want %s", got, txHash(7))
	}
}
