package remotes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/consensus"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// shadowCall answers one call from node's handler without a network hop:
// the lying hooks use it to start from the honest answer.
func shadowCall(node *fakenode.Node, method string, params json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		params = json.RawMessage("[]")
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	node.Handler().ServeHTTP(rec, req)
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		return nil
	}
	return resp.Result
}

// lie makes node answer method with the honest answer (from a shadow node
// on the same chain) changed by change.
func lie(t *testing.T, node *fakenode.Node, head uint64, method string, change func(json.RawMessage) json.RawMessage) {
	t.Helper()
	shadow := fakenode.New(fakenode.Options{ChainID: testChainID, Head: head})
	t.Cleanup(shadow.Close)
	node.SetHook(func(m string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if m != method {
			return nil, nil, false
		}
		return change(shadowCall(shadow, m, params)), nil, true
	})
}

// wrongHash flips the last hex digit of a block's hash.
func wrongHash(res json.RawMessage) json.RawMessage {
	const key = `"hash":"0x`
	i := bytes.Index(res, []byte(key))
	if i < 0 {
		return res
	}
	out := bytes.Clone(res)
	j := i + len(key) + 63
	if out[j] == '0' {
		out[j] = '1'
	} else {
		out[j] = '0'
	}
	return out
}

// setField sets a top-level field of an object result.
func setField(key, val string) func(json.RawMessage) json.RawMessage {
	return func(res json.RawMessage) json.RawMessage {
		var m map[string]json.RawMessage
		if json.Unmarshal(res, &m) != nil {
			return res
		}
		m[key] = json.RawMessage(val)
		b, _ := json.Marshal(m)
		return b
	}
}

func always(v string) func(json.RawMessage) json.RawMessage {
	return func(json.RawMessage) json.RawMessage { return json.RawMessage(v) }
}

// stopPool stops p now, so that every late vote has been judged.
func stopPool(t *testing.T, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitJudged waits until the ballots that came late to the votes of the
// calls returned so far are judged (vote.judgeLate): their misbehaviours
// are counted then.
func waitJudged(t *testing.T, p *Pool) {
	t.Helper()
	waitFor(t, "late ballots judged", func() bool { return p.cons.late.Load() == 0 })
}

func misbehaviours(p *Pool, remote, kind string) float64 {
	return testutil.ToFloat64(p.cons.Metrics().Misbehaviours(p.conf().Chain, remote, kind))
}

// TestConsensus runs one call through a pool of three primary remotes
// n0..n2, with the methods under test put to a 2-of-3 vote unless the case
// says otherwise.
func TestConsensus(t *testing.T) {
	const (
		head    = 100
		block   = `["0x20",false]`
		revert  = `[{"to":"0x0000000000000000000000000000000000000001","data":"0xdeadbeef"},"0x20"]`
		logs    = `[{"fromBlock":"0x10","toBlock":"0x18"}]`
		methods = "eth_getBlockByNumber eth_getTransactionReceipt eth_call eth_getLogs"
	)
	honest := fakenode.New(fakenode.Options{ChainID: testChainID, Head: head})
	t.Cleanup(honest.Close)
	receipt := fmt.Sprintf(`[%q]`, honest.TxHash(0x20, 0))

	type fault func(t *testing.T, n []*fakenode.Node)
	tests := []struct {
		name    string
		rule    ConsensusRule
		tweak   func(i int, c *Config)
		maxLag  uint64
		fault   fault
		method  string
		params  string
		wantErr int    // wire code; 0: success
		want    string // the result, when not the honest node's answer
		// misbehaving remote names, after every vote was judged
		wantBad  []string
		wantTip  []string // disagree_tip
		wantN    [3]int64 // calls of method that reached n0..n2; -1 unchecked
		wantOut  string   // consensus outcome counted
		wantNone bool     // the call was not put to a vote
	}{
		{name: "all agree", method: "eth_getBlockByNumber", params: block,
			wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "one liar is outvoted and punished", method: "eth_getBlockByNumber", params: block,
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[2], head, "eth_getBlockByNumber", wrongHash)
			},
			wantBad: []string{"n2"}, wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "an ignored field does not count", method: "eth_getBlockByNumber", params: block,
			rule: ConsensusRule{IgnoreFields: []string{"size"}},
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[2], head, "eth_getBlockByNumber", setField("size", `"0x1"`))
			},
			wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "no two agree: an error", method: "eth_getBlockByNumber", params: block,
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[1], head, "eth_getBlockByNumber", setField("size", `"0x1"`))
				lie(t, n[2], head, "eth_getBlockByNumber", setField("size", `"0x2"`))
			},
			wantErr: jrpc.CodeRemotesDisagree, wantN: [3]int64{1, 1, 1}, wantOut: "disputed"},
		{name: "most_common answers a dispute, unpunished", method: "eth_getBlockByNumber", params: block,
			rule: ConsensusRule{Agree: 3, OnDispute: consensus.DisputeMostCommon},
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[2], head, "eth_getBlockByNumber", wrongHash)
			},
			wantN: [3]int64{1, 1, 1}, wantOut: "resolved"},
		{name: "prefer_tier takes the primary over a majority", method: "eth_getBlockByNumber", params: block,
			rule: ConsensusRule{Agree: 3, OnDispute: consensus.DisputePreferTier, TrustedTier: TierPrimary},
			tweak: func(i int, c *Config) {
				if i > 0 {
					c.Tier = TierSecondary
				}
			},
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[1], head, "eth_getBlockByNumber", wrongHash)
				lie(t, n[2], head, "eth_getBlockByNumber", wrongHash)
			},
			wantN: [3]int64{1, 1, 1}, wantOut: "resolved"},
		{name: "reverts agree", method: "eth_call", params: revert, wantErr: 3,
			wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "an upstream fault does not vote", method: "eth_getBlockByNumber", params: block,
			fault: func(t *testing.T, n []*fakenode.Node) {
				n[2].SetHook(func(m string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
					if m != "eth_getBlockByNumber" || strings.Contains(string(params), "latest") {
						return nil, nil, false // its head polls are answered
					}
					return nil, &jrpc.Error{Code: -32603, Message: "internal error"}, true
				})
			},
			wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "a remote below the block does not vote", method: "eth_getBlockByNumber", params: `["0x64",false]`,
			maxLag: 5,
			fault: func(t *testing.T, n []*fakenode.Node) {
				n[2].SetLag(3)
			},
			wantN: [3]int64{1, 1, 0}, wantOut: "agreed"},
		{name: "a null receipt is not a lie", method: "eth_getTransactionReceipt", params: receipt,
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[2], head, "eth_getTransactionReceipt", always("null"))
			},
			wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "a disagreement at the head is not punished", method: "eth_getBlockByNumber", params: `["0x63",false]`,
			maxLag: 5,
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[2], head, "eth_getBlockByNumber", wrongHash)
			},
			wantTip: []string{"n2"}, wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
		{name: "a moving tag is not voted on", method: "eth_getBlockByNumber", params: `["latest",false]`,
			wantN: [3]int64{-1, -1, -1}, wantNone: true},
		{name: "eth_getLogs: dropped logs are outvoted", method: "eth_getLogs", params: logs,
			fault: func(t *testing.T, n []*fakenode.Node) {
				lie(t, n[0], head, "eth_getLogs", always("[]"))
			},
			wantBad: []string{"n0"}, wantN: [3]int64{1, 1, 1}, wantOut: "agreed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := make([]*fakenode.Node, 3)
			for i := range nodes {
				nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
			}
			rule := tt.rule
			rule.Methods = strings.Fields(methods)
			cfg := PoolConfig{MaxLag: tt.maxLag, BlockTime: time.Hour, Consensus: []ConsensusRule{rule}}
			if cfg.MaxLag == 0 {
				cfg.MaxLag = 1
			}
			if tt.fault != nil {
				tt.fault(t, nodes) // before the pool starts: a lag must show in the first head
			}
			p := testPool(t, cfg, nodes, tt.tweak)
			for _, n := range nodes {
				n.ResetCalls()
			}
			got, err := call(t, p, tt.method, tt.params)
			stopPool(t, p)
			if code := wireCode(err); code != tt.wantErr || err != nil && tt.wantErr == 0 {
				t.Fatalf("err %v (code %d), want code %d", err, code, tt.wantErr)
			}
			if tt.wantErr == 0 {
				want := json.RawMessage(tt.want)
				if tt.want == "" {
					want = shadowCall(honest, tt.method, json.RawMessage(tt.params))
				}
				// Ignored fields are not compared: the answer may carry any
				// agreeing remote's value of them.
				ig, _ := consensus.CompileIgnore(rule.IgnoreFields)
				g, _ := consensus.Canonical(got, ig)
				w, _ := consensus.Canonical(want, ig)
				if string(g) != string(w) {
					t.Fatalf("got %.200s\nwant %.200s", got, want)
				}
			}
			for i, n := range nodes {
				if w := tt.wantN[i]; w >= 0 && n.Calls(tt.method) != w {
					t.Errorf("n%d got %d calls of %s, want %d", i, n.Calls(tt.method), tt.method, w)
				}
			}
			if tt.wantNone {
				total := nodes[0].Calls(tt.method) + nodes[1].Calls(tt.method) + nodes[2].Calls(tt.method)
				if total != 1 {
					t.Errorf("%d calls, want 1: not a vote", total)
				}
			}
			for i := range nodes {
				name := fmt.Sprintf("n%d", i)
				for kind, want := range map[string][]string{misbehave.Disagree: tt.wantBad, misbehave.DisagreeTip: tt.wantTip} {
					wantN := 0.0
					if strings.Contains(strings.Join(want, " "), name) {
						wantN = 1
					}
					if got := misbehaviours(p, name, kind); got != wantN {
						t.Errorf("%s: %v %s misbehaviours, want %v", name, got, kind, wantN)
					}
				}
			}
			if tt.wantOut != "" {
				if got := testutil.ToFloat64(p.cons.Metrics().Consensus("test", tt.method, tt.wantOut)); got != 1 {
					t.Errorf("outcome %s counted %v times, want 1", tt.wantOut, got)
				}
			}
		})
	}
}

// A split eth_getLogs puts every part to a vote: a liar is outvoted part by
// part and the merged result is right. The liar is not cordoned by its
// strikes here: on a busy machine the last part may pick its voters only
// after the others cordoned it, and would not ask it at all.
func TestConsensusGetLogsParts(t *testing.T) {
	const head = 300 // the parts end well below the head: no fork doubt
	nodes := make([]*fakenode.Node, 3)
	for i := range nodes {
		nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	}
	lie(t, nodes[1], head, "eth_getLogs", always("[]"))
	const parts = 4
	p := testPool(t, PoolConfig{BlockTime: time.Hour, Cordon: CordonConfig{Strikes: parts + 1},
		Consensus: []ConsensusRule{{Methods: []string{"eth_getLogs"}}}},
		nodes, func(_ int, c *Config) { c.MaxLogsRange = 50 })
	params := `[{"fromBlock":"0x1","toBlock":"0xc8"}]` // 200 blocks: parts of 50
	got, err := call(t, p, "eth_getLogs", params)
	if err != nil {
		t.Fatal(err)
	}
	honest := fakenode.New(fakenode.Options{ChainID: testChainID, Head: head})
	t.Cleanup(honest.Close)
	if want := shadowCall(honest, "eth_getLogs", json.RawMessage(params)); !jsonEqual(t, got, want) {
		t.Fatalf("merged logs differ from the honest answer: %d bytes, want %d", len(got), len(want))
	}
	stopPool(t, p)
	if n := nodes[0].Calls("eth_getLogs"); n < parts {
		t.Fatalf("%d calls: not split", n)
	}
	if got := misbehaviours(p, "n1", misbehave.Disagree); got != parts {
		t.Fatalf("liar punished %v times, want once per part (%d)", got, parts)
	}
}

// A remote that keeps failing to answer is replaced: quorum comes from the
// others, and only MaxAttempts-1 replacements are made.
func TestConsensusReplacesSilentRemotes(t *testing.T) {
	nodes := make([]*fakenode.Node, 4)
	for i := range nodes {
		nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	}
	p := testPool(t, PoolConfig{BlockTime: time.Hour, MaxAttempts: 2,
		Consensus: []ConsensusRule{{Methods: []string{"eth_getBalance"}}}}, nodes, nil)
	for _, n := range nodes[:2] {
		n.SetRPCError(-32603, "internal error")
	}
	// Three are asked at once, so one or both broken remotes are among
	// them; one replacement always finds the second good answer.
	for i := range 10 {
		if _, err := call(t, p, "eth_getBalance", fmt.Sprintf(`["0x00000000000000000000000000000000000000aa","0x%x"]`, 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	stopPool(t, p)
	var total int64
	for _, n := range nodes {
		total += n.Calls("eth_getBalance")
	}
	if total < 30 || total > 40 {
		t.Fatalf("%d calls for 10 votes, want 3 each and at most 1 replacement", total)
	}
}
