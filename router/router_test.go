package router

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// recorder is the remotes: it records what reached it. Its head is 100.
type recorder struct {
	quietTip
	sent []jrpc.Request
}

func (r *recorder) HealthyHead() uint64 { return 100 }

func (r *recorder) ServeCall(_ context.Context, c evm.Call) (json.RawMessage, error) {
	r.sent = append(r.sent, jrpc.Request{Method: c.Method, Params: c.Params})
	return json.RawMessage(`"0x10"`), nil
}

// quietTip is remotes whose heads say nothing of the window's hash or age:
// they know no hash, and were heard from lately.
type quietTip struct{}

func (quietTip) HashAt(uint64) (string, bool)              { return "", false }
func (quietTip) Reports(uint64, string) bool               { return false }
func (quietTip) HeardWithin(time.Time, time.Duration) bool { return true }
func (quietTip) BlockTime() time.Duration                  { return time.Second }

// fakeHead answers eth_blockNumber and knows the given tags.
type fakeHead struct {
	tags headstore.Tags
	ok   bool
}

func (h fakeHead) Answer(c evm.Call) (json.RawMessage, bool) {
	if c.Method == "eth_blockNumber" && h.ok {
		return json.RawMessage(`"0x64"`), true
	}
	return nil, false
}

func (h fakeHead) Tags() (headstore.Tags, bool) { return h.tags, h.ok }

func (h fakeHead) Latest() (uint64, bool) { return h.tags.Latest, h.ok }

func (h fakeHead) Monotonic(n, _ uint64) uint64 { return max(n, h.tags.Latest) }

func TestRouterLocalAnswers(t *testing.T) {
	rec := &recorder{}
	rt := New(Config{Chain: "polygon", ChainID: 137}, nil, rec, nil)

	res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_chainId"})
	if err != nil || string(res) != `"0x89"` {
		t.Fatalf("eth_chainId = %s, %v; want \"0x89\" from config", res, err)
	}
	for _, m := range []string{"eth_subscribe", "eth_unsubscribe"} {
		_, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: m})
		if je := jrpc.ToWire(err); je == nil || je.Code != jrpc.CodeMethodNotFound || je.Message != "notifications not supported" {
			t.Errorf("%s: err = %v, want -32601 as geth answers over HTTP", m, err)
		}
	}
	if res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_blockNumber"}); err != nil || string(res) != `"0x10"` {
		t.Fatalf("eth_blockNumber = %s, %v; want the remotes' answer without a head window", res, err)
	}
	if len(rec.sent) != 1 || rec.sent[0].Method != "eth_blockNumber" {
		t.Fatalf("remotes saw %v, want only eth_blockNumber", rec.sent)
	}
}

func TestRouterPinsTags(t *testing.T) {
	head := fakeHead{tags: headstore.Tags{Latest: 100, Safe: 90}, ok: true}
	stale := fakeHead{tags: headstore.Tags{Latest: 50}, ok: true}
	tests := []struct {
		name, method, give, want string
		head                     fakeHead
	}{
		{"latest", "eth_getBalance", `["0xab","latest"]`, `["0xab","0x64"]`, head},
		{"spacing kept", "eth_call", `[{"to":"0xab"}, "latest" ]`, `[{"to":"0xab"}, "0x64" ]`, head},
		{"safe", "eth_getStorageAt", `["0xab","0x0","safe"]`, `["0xab","0x0","0x5a"]`, head},
		{"finalized unknown", "eth_getCode", `["0xab","finalized"]`, `["0xab","finalized"]`, head},
		{"pending kept", "eth_getTransactionCount", `["0xab","pending"]`, `["0xab","pending"]`, head},
		{"number kept", "eth_getBalance", `["0xab","0x5"]`, `["0xab","0x5"]`, head},
		{"absent kept", "eth_call", `[{"to":"0xab"}]`, `[{"to":"0xab"}]`, head},
		{"eip-1898 kept", "eth_getBalance", `["0xab",{"blockNumber":"latest"}]`, `["0xab",{"blockNumber":"latest"}]`, head},
		{"no block param", "eth_gasPrice", `[]`, `[]`, head},
		{"empty window", "eth_getBalance", `["0xab","latest"]`, `["0xab","latest"]`, fakeHead{}},
		{"stale window", "eth_getBalance", `["0xab","latest"]`, `["0xab","latest"]`, stale},
		{"no remote has it yet", "eth_getBalance", `["0xab","latest"]`, `["0xab","latest"]`, fakeHead{tags: headstore.Tags{Latest: 101}, ok: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5}, tt.head, rec, nil)
			if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: tt.method, Params: json.RawMessage(tt.give)}); err != nil {
				t.Fatal(err)
			}
			if len(rec.sent) != 1 || string(rec.sent[0].Params) != tt.want {
				t.Fatalf("forwarded %v, want params %s", rec.sent, tt.want)
			}
		})
	}
}

func TestRouterAnswersFromAFreshHead(t *testing.T) {
	tests := []struct {
		name     string
		head     fakeHead
		upstream int // calls that reach the remotes
	}{
		{"fresh", fakeHead{tags: headstore.Tags{Latest: 100}, ok: true}, 0},
		{"within max_lag", fakeHead{tags: headstore.Tags{Latest: 95}, ok: true}, 0},
		{"stale: its leader is stuck", fakeHead{tags: headstore.Tags{Latest: 94}, ok: true}, 1},
		{"feed lost", fakeHead{tags: headstore.Tags{Latest: 100}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5}, tt.head, rec, nil)
			if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_blockNumber"}); err != nil {
				t.Fatal(err)
			}
			if len(rec.sent) != tt.upstream {
				t.Fatalf("%d upstream calls, want %d", len(rec.sent), tt.upstream)
			}
		})
	}
}

func TestRouterBlockNumberNeverGoesBack(t *testing.T) {
	// The window is stale (feed lost) and a remote answers below what the
	// window answered: the client still sees the higher number.
	rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5}, fakeHead{tags: headstore.Tags{Latest: 0x20}}, &recorder{}, nil)
	res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_blockNumber"})
	if err != nil || string(res) != `"0x20"` {
		t.Fatalf("eth_blockNumber = %s, %v; want \"0x20\", not the remote's lower 0x10", res, err)
	}
}

// blockNumberRemotes answers eth_blockNumber with answer; healthy is the
// corroborated head of the remotes in rotation.
type blockNumberRemotes struct {
	quietTip
	answer, healthy uint64
}

func (r *blockNumberRemotes) HealthyHead() uint64 { return r.healthy }

func (r *blockNumberRemotes) ServeCall(context.Context, evm.Call) (json.RawMessage, error) {
	return json.RawMessage(`"` + evm.Quantity(r.answer) + `"`), nil
}

// A forwarded eth_blockNumber from a remote that lies is not the
// cluster's head: the client gets the corroborated head, and once the lie
// is over the next answer is the truth, not a floor the lie left behind.
func TestForwardedBlockNumberNeverPoisonsTheFloor(t *testing.T) {
	w := headstore.NewWindow(8) // empty: eth_blockNumber is forwarded
	up := &blockNumberRemotes{answer: 1_000_000_000, healthy: 100}
	rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5}, w, up, nil)
	blockNumber := func() uint64 {
		t.Helper()
		res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_blockNumber"})
		if err != nil {
			t.Fatal(err)
		}
		var s string
		if err := json.Unmarshal(res, &s); err != nil {
			t.Fatal(err)
		}
		n, err := evm.ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := blockNumber(); got != 100 {
		t.Errorf("a remote's 1e9 served as %d, want the corroborated head 100", got)
	}
	up.answer, up.healthy = 101, 101 // the lie is over
	if got := blockNumber(); got != 101 {
		t.Errorf("after the lie: %d, want 101", got)
	}
	up.answer = 99 // a lagging remote: never backwards
	if got := blockNumber(); got != 101 {
		t.Errorf("a lagging remote's 99 served as %d, want 101", got)
	}
}

// A window that trails the remotes is said once, at Warn, while calls go
// to the remotes; its catching up once more.
func TestRouterWarnsWhenTheWindowTrails(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	head := &fakeHead{tags: headstore.Tags{Latest: 90}, ok: true} // 10 behind the remotes' 100
	rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5, Logger: log}, head, &recorder{}, nil)
	for range 3 {
		if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getBalance", Params: json.RawMessage(`["0xab","latest"]`)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(logs.String(), "level=WARN msg=\"head window trails the remotes"); got != 1 {
		t.Fatalf("%d warnings over 3 calls with a trailing window, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "window_head=90 remotes_head=100") {
		t.Errorf("warning lacks the heads: %s", logs.String())
	}
	head.tags.Latest = 100
	if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_blockNumber"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "head window caught up") {
		t.Errorf("no word of the window catching up: %s", logs.String())
	}
}
