package relay

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/venn-gateway/venn/remotes/wire"
)

// fakeUpstream is a remote that answers nothing: the tests here are of
// the choice among remotes, not of a call (the pool's tests relay for
// real, through fake nodes and geth).
type fakeUpstream struct {
	name  string
	ws    bool
	lacks map[string]bool
}

func (u *fakeUpstream) Name() string                        { return u.name }
func (u *fakeUpstream) Logger() *slog.Logger                { return slog.New(slog.DiscardHandler) }
func (u *fakeUpstream) CanSubscribe() bool                  { return u.ws }
func (u *fakeUpstream) Configured(string) bool              { return true }
func (u *fakeUpstream) Supports(method string) bool         { return !u.lacks[method] }
func (u *fakeUpstream) Lacks(key string) bool               { return u.lacks[key] }
func (u *fakeUpstream) MarkUnsupported(key string, _ error) { u.lacks[key] = true }

func (u *fakeUpstream) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no call")
}

func (u *fakeUpstream) Subscribe(json.RawMessage, int64, wire.SubHooks) (*wire.Subscription, error) {
	return nil, errors.New("no subscription")
}

// fakePool picks the first remote accept admits, in order: the pool's
// selection is the pool's to test.
type fakePool struct {
	now     time.Time
	members []Upstream
}

func (p *fakePool) Chain() string               { return "test" }
func (p *fakePool) Now() time.Time              { return p.now }
func (p *fakePool) PollInterval() time.Duration { return DefaultPollInterval }
func (p *fakePool) Members() []Upstream         { return p.members }

func (p *fakePool) Pick(_ time.Time, accept func(Upstream) bool) Upstream {
	for _, u := range p.members {
		if accept(u) {
			return u
		}
	}
	return nil
}

func newFakePool(n int) *fakePool {
	p := &fakePool{now: time.Unix(1_700_000_000, 0)}
	for i := range n {
		p.members = append(p.members, &fakeUpstream{name: string(rune('a' + i)), ws: true, lacks: map[string]bool{}})
	}
	return p
}

// The relay and the poller leave a remote whose relay of their kind
// failed lately for last; when every one failed, the one to retry
// soonest comes, with its failure.
func TestPickLeavesFailedLast(t *testing.T) {
	p := newFakePool(3)
	rl := New(p)
	a, b, c := p.members[0], p.members[1], p.members[2]
	key := subscribeKey(json.RawMessage(`["newHeads"]`))
	pickers := map[string]struct {
		pick func() (Upstream, failure, bool)
		fs   *failures
	}{
		"relay":  {func() (Upstream, failure, bool) { return rl.wsPicker(key).pick(p.now) }, &rl.ws},
		"poller": {func() (Upstream, failure, bool) { return rl.pollPicker().pick(p.now) }, &rl.poll},
	}
	for name, pk := range pickers {
		if r, failed, ok := pk.pick(); !ok || r != a || failed.n != 0 {
			t.Errorf("%s: %v %+v %v, want a, no failure", name, r, failed, ok)
		}
		pk.fs.note(a, p.now)
		if r, failed, ok := pk.pick(); !ok || r != b || failed.n != 0 {
			t.Errorf("%s after a failed: %v %+v, want b, no failure", name, r, failed)
		}
		pk.fs.note(b, p.now)
		pk.fs.note(b, p.now)
		pk.fs.note(c, p.now.Add(-time.Millisecond))
		r, failed, ok := pk.pick()
		if !ok || r != c || failed.n != 1 {
			t.Errorf("%s after all failed: %v %+v, want c, which retries soonest, with its one failure", name, r, failed)
		}
	}
	if r, _, _ := rl.wsPicker(key).pick(p.now); r == nil {
		t.Fatal("no remote")
	}
	for _, u := range p.members {
		u.MarkUnsupported(key, nil)
	}
	if r, _, ok := rl.wsPicker(key).pick(p.now); ok {
		t.Errorf("picked %v, which lacks the subscription", r)
	}
	if !rl.lacksSubscription(key) {
		t.Error("lacksSubscription: want every remote known to lack it")
	}
}

// The backoff doubles with each failure in a row, from a second to
// thirty, and a failure older than backoffForget is forgotten.
func TestBackoff(t *testing.T) {
	var fs failures
	u := &fakeUpstream{name: "a"}
	now := time.Unix(1_700_000_000, 0)
	for i, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
		fs.note(u, now)
		f, ok := fs.last(u, now)
		if !ok || f.retryAt().Sub(now) != want*time.Second {
			t.Errorf("failure %d: retry after %v, want %v", i+1, f.retryAt().Sub(now), want*time.Second)
		}
	}
	later := now.Add(backoffForget)
	if _, ok := fs.last(u, later); ok {
		t.Error("a failure backoffForget ago is still remembered")
	}
	fs.note(u, later)
	if f, _ := fs.last(u, later); f.n != 1 {
		t.Errorf("after a forgotten failure: %d in a row, want 1", f.n)
	}
}

func TestPendingParams(t *testing.T) {
	tests := []struct {
		give     string
		full, ok bool
		key      string
	}{
		{give: `["newPendingTransactions"]`, ok: true, key: "eth_subscribe newPendingTransactions"},
		{give: `["newPendingTransactions",true]`, full: true, ok: true, key: "eth_subscribe newPendingTransactions true"},
		{give: `["newPendingTransactions",false]`, ok: true, key: "eth_subscribe newPendingTransactions"},
		{give: `["newPendingTransactions",1]`, key: `eth_subscribe ["newPendingTransactions",1]`},
		{give: `["newHeads"]`, key: `eth_subscribe ["newHeads"]`},
		{give: `[]`, key: `eth_subscribe []`},
	}
	for _, tt := range tests {
		full, ok := pendingParams(json.RawMessage(tt.give))
		if full != tt.full || ok != tt.ok {
			t.Errorf("pendingParams(%s) = %v, %v; want %v, %v", tt.give, full, ok, tt.full, tt.ok)
		}
		if got := subscribeKey(json.RawMessage(tt.give)); got != tt.key {
			t.Errorf("subscribeKey(%s) = %q, want %q", tt.give, got, tt.key)
		}
	}
}

// BenchmarkPick is the relay's own share of a pick: its backoff lookups
// around the pool's selection (here a fake one; the pool's is remotes'
// BenchmarkPick/relay).
func BenchmarkPick(b *testing.B) {
	p := newFakePool(3)
	rl := New(p)
	pk := rl.wsPicker(subscribeKey(json.RawMessage(`["newHeads"]`)))
	for b.Loop() {
		if _, _, ok := pk.pick(p.now); !ok {
			b.Fatal("no remote")
		}
	}
}
