package stalker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/internal/testkit"
)

// answer is what the fake upstream says to a read of one block tag.
type answer struct {
	res string
	err error
}

// tagUpstream answers eth_getBlockByNumber for a tag from its table and
// has no tip, so a step of its stalker reads only finality.
type tagUpstream struct {
	mu    sync.Mutex
	tags  map[string]answer
	calls int
}

func (u *tagUpstream) set(tag string, a answer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.tags[tag] = a
}

func (u *tagUpstream) reads() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

func (u *tagUpstream) Call(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	var args []json.RawMessage
	var tag string
	if method != "eth_getBlockByNumber" || json.Unmarshal(params, &args) != nil || len(args) == 0 ||
		json.Unmarshal(args[0], &tag) != nil {
		return nil, errors.New("unexpected call " + method + string(params))
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls++
	a, ok := u.tags[tag]
	if !ok {
		return nil, errors.New("no answer for " + tag)
	}
	return json.RawMessage(a.res), a.err
}

func (u *tagUpstream) CallVerified(ctx context.Context, method string, params json.RawMessage,
	_ func(json.RawMessage) integrity.Verdict, _ time.Duration) (json.RawMessage, integrity.Verdict, error) {
	res, err := u.Call(ctx, method, params)
	return res, integrity.Verdict{}, err
}

func (u *tagUpstream) Tip() (uint64, string)        { return 0, "" }
func (u *tagUpstream) HeadChanged() <-chan struct{} { return nil }
func (u *tagUpstream) BlockTime() time.Duration     { return time.Second }

func (u *tagUpstream) CheckTipChain(context.Context, ...string) bool { return true }

// finalityErrors is the chain's count of failed finality reads.
func finalityErrors(m *Metrics) float64 {
	return testutil.ToFloat64(m.finalityErrors.WithLabelValues("test"))
}

func TestReadFinalityCountsFailedReads(t *testing.T) {
	tests := []struct {
		name        string
		give        answer
		want        uint64
		wantCounted float64
	}{
		{name: "a block", give: answer{res: `{"number":"0x10"}`}, want: 16},
		{name: "no such block", give: answer{res: `null`}},
		{name: "call fails", give: answer{err: errors.New("upstream down")}, wantCounted: 2},
		{name: "not a block", give: answer{res: `"0x10"`}, wantCounted: 2},
		{name: "not a number", give: answer{res: `{"number":"ten"}`}, wantCounted: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &tagUpstream{tags: map[string]answer{"safe": tt.give, "finalized": tt.give}}
			m := NewMetrics(nil)
			st := New(Config{Chain: "test"}, up, up, nil, nil, m)
			l := &leading{safe: 3, finalized: 2}
			st.readFinality(context.Background(), l)
			if want := max(tt.want, 3); l.safe != want {
				t.Errorf("safe = %d, want %d", l.safe, want)
			}
			if want := max(tt.want, 2); l.finalized != want {
				t.Errorf("finalized = %d, want %d", l.finalized, want)
			}
			if got := finalityErrors(m); got != tt.wantCounted {
				t.Errorf("finality errors = %v, want %v", got, tt.wantCounted)
			}
		})
	}
}

// TestFailingFinalityReadIsCountedAndLogged drives the leader's steps on
// the stalker's clock: finality is read at the first step and again each
// FinalityInterval, every failed read is counted, and a run of failures is
// logged once when it starts and once when it ends.
func TestFailingFinalityReadIsCountedAndLogged(t *testing.T) {
	up := &tagUpstream{tags: map[string]answer{
		"safe":      {err: errors.New("safe block not found")},
		"finalized": {res: `{"number":"0x10"}`},
	}}
	logs := &testkit.Buffer{}
	m := NewMetrics(nil)
	const interval = time.Minute
	st := New(Config{Chain: "test", HeadConfig: HeadConfig{FinalityInterval: interval}}, up, up, headstore.NewMemory(8),
		slog.New(slog.NewTextHandler(logs, nil)), m)
	now := time.Unix(1_000_000, 0)
	st.now = func() time.Time { return now }
	l := &leading{epoch: headstore.MemoryEpoch}
	step := func() {
		t.Helper()
		if err := st.step(context.Background(), l); err != nil {
			t.Fatalf("step: %v", err)
		}
	}
	const failed, recovered = "reading safe and finalized failed", "reading safe and finalized again"

	step()
	if got := finalityErrors(m); got != 1 {
		t.Errorf("after the first read: finality errors = %v, want 1", got)
	}
	if l.safe != 0 || l.finalized != 16 {
		t.Errorf("safe %d finalized %d, want 0 and 16", l.safe, l.finalized)
	}
	if n := strings.Count(logs.String(), failed); n != 1 {
		t.Errorf("failure logged %d times, want 1:\n%s", n, logs.String())
	}

	now = now.Add(interval - time.Nanosecond)
	step()
	if got := up.reads(); got != 2 {
		t.Fatalf("%d reads before the interval passed, want 2", got)
	}

	now = now.Add(time.Nanosecond)
	step()
	if got := finalityErrors(m); got != 2 {
		t.Errorf("after the second read: finality errors = %v, want 2", got)
	}
	if n := strings.Count(logs.String(), failed); n != 1 {
		t.Errorf("a run of failures logged %d times, want once:\n%s", n, logs.String())
	}

	up.set("safe", answer{res: `{"number":"0xc"}`})
	now = now.Add(interval)
	step()
	if got := finalityErrors(m); got != 2 {
		t.Errorf("after a good read: finality errors = %v, want 2", got)
	}
	if l.safe != 12 || l.finalized != 16 {
		t.Errorf("safe %d finalized %d, want 12 and 16", l.safe, l.finalized)
	}
	if !strings.Contains(logs.String(), recovered) {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
}
