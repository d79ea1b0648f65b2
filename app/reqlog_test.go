package app

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// observedVenn is venn in front of two fake nodes, primary-a asked first
// and backup-b, both with a key in their URL, and the request log in a
// file.
type observedVenn struct {
	rpc     string
	logPath string
	a, b    *fakenode.Node
	client  *http.Client
}

// extra is more top-level YAML, logExtra more fields of request_log.
func startObserved(t *testing.T, extra, logExtra string) *observedVenn {
	t.Helper()
	o := &observedVenn{
		a:       fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 50}),
		b:       fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 50}),
		logPath: filepath.Join(t.TempDir(), "requests.log"),
		client:  &http.Client{Timeout: 10 * time.Second},
	}
	t.Cleanup(o.client.CloseIdleConnections)
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
log: {level: warn}
shutdown_timeout: 5s
request_log: {enabled: true, output: `+o.logPath+logExtra+`}
`+extra+`
chains:
  - name: test
    chain_id: 1337
    block_time: 1h
    remotes:
      - {name: primary-a, url: "`+o.a.URL()+`SECRETKEY"}
      - {name: backup-b, url: "`+o.b.URL()+`SECRETKEY", tier: secondary}
`)
	s := startApp(t, cfg)
	o.rpc = "http://" + s.rpc.bound.String() + "/test"
	// Both in rotation before the first call, which fails over to backup-b.
	metrics := "http://" + s.metrics.bound.String()
	for _, r := range []string{"primary-a", "backup-b"} {
		testkit.WaitFor(t, 10*time.Second, r+" in rotation", func() bool {
			v, ok := metricValue(t, o.client, metrics, `venn_remote_healthy{chain="test",remote="`+r+`"}`)
			return ok && v == 1
		})
	}
	return o
}

// call posts body with the given request id ("" none) and returns the
// answer's headers and body.
func (o *observedVenn) call(t *testing.T, body, id string) (http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, o.rpc, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header, string(b)
}

// line waits for the request log's line of request id (the index-th of
// them) and returns it, raw and decoded.
func (o *observedVenn) line(t *testing.T, id string, index int) (string, map[string]any) {
	t.Helper()
	var raw string
	var got map[string]any
	testkit.WaitFor(t, 5*time.Second, "the request log line of "+id, func() bool {
		b, err := os.ReadFile(o.logPath)
		if err != nil {
			return false
		}
		// Whole lines only: the logger may be halfway through the last.
		lines := strings.Split(string(b), "\n")
		n := 0
		for _, l := range lines[:len(lines)-1] {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("request log line %q: %v", l, err)
			}
			if m["request_id"] == id {
				if n == index {
					raw, got = l, m
					return true
				}
				n++
			}
		}
		return false
	})
	return raw, got
}

const balanceCall = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}`

// TestDiagnosticsThroughApp checks, over real HTTP through the whole app,
// the diagnostic headers of a call that fails over once, of a head-served
// call and of a batch, the request id kept or made, and the request log's
// lines: fields right, the address masked, params absent; no URL or key
// in any of it.
func TestDiagnosticsThroughApp(t *testing.T) {
	o := startObserved(t, "", "")
	// primary-a fails the balance with an upstream fault: backup-b answers.
	o.a.SetHook(func(m string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if m != "eth_getBalance" {
			return nil, nil, false
		}
		return nil, &jrpc.Error{Code: -32000, Message: "header not found"}, true
	})
	var seen []string // every header value and log line, for the secrets check

	h, body := o.call(t, balanceCall, "client-id-1")
	if !strings.Contains(body, `"result"`) {
		t.Fatalf("balance: %s", body)
	}
	for k, want := range map[string]string{"X-Venn-Source": "remotes", "X-Venn-Remote": "backup-b",
		"X-Venn-Attempts": "2", "X-Request-Id": "client-id-1"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if h.Get("X-Venn-Duration-Ms") == "" {
		t.Error("no X-Venn-Duration-Ms")
	}
	raw, l := o.line(t, "client-id-1", 0)
	seen = append(seen, raw)
	for k, want := range map[string]any{"chain": "test", "method": "eth_getBalance", "client": "ip:127.0.0.0/24",
		"source": "remotes", "remote": "backup-b", "attempts": 2.0, "outcome": "ok", "code": 0.0, "status": 200.0,
		"bytes_in": float64(len(balanceCall)), "bytes_out": float64(len(body)), "transport": "http"} {
		if l[k] != want {
			t.Errorf("log %s = %v, want %v", k, l[k], want)
		}
	}
	if _, ok := l["params"]; ok {
		t.Errorf("params logged by default: %s", raw)
	}

	// The head window has the latest block once the stalker has run.
	var id string
	testkit.WaitFor(t, 5*time.Second, "a head-served latest block", func() bool {
		h, _ = o.call(t, `{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["latest",false]}`, "")
		id = h.Get("X-Request-Id")
		return h.Get("X-Venn-Source") == "head"
	})
	if h.Get("X-Venn-Remote") != "" || h.Get("X-Venn-Attempts") != "0" || id == "" {
		t.Errorf("head-served headers %v", h)
	}
	_, l = o.line(t, id, 0)
	if l["source"] != "head" || l["remote"] != nil {
		t.Errorf("head-served line %v", l)
	}

	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},` + balanceCall + `,` +
		`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["latest",false]}]`
	h, _ = o.call(t, batch, "")
	if got := h.Get("X-Venn-Sources"); got != "head=1,remotes=1,local=1" {
		t.Errorf("X-Venn-Sources = %q", got)
	}
	if got := h.Get("X-Venn-Attempts"); got != "2" {
		t.Errorf("batch X-Venn-Attempts = %q, want 2", got)
	}
	if h.Get("X-Venn-Source") != "" || h.Get("X-Venn-Remote") != "" {
		t.Errorf("a batch has single-call headers: %v", h)
	}
	for i := range 3 {
		raw, l := o.line(t, h.Get("X-Request-Id"), i)
		seen = append(seen, raw)
		if l["batch_index"] != float64(i) {
			t.Errorf("batch line %d: %s", i, raw)
		}
	}
	for k, vs := range h {
		seen = append(seen, k+": "+strings.Join(vs, ","))
	}
	for _, s := range seen {
		if strings.Contains(s, "SECRETKEY") || strings.Contains(s, "http://") || strings.Contains(s, "127.0.0.1:") {
			t.Errorf("a URL or key shows: %s", s)
		}
	}
}

// TestDiagnosticHeadersOff checks the switch: no X-Venn header at all, the
// request id still there; and params logged when allowed, a raw
// transaction as its hash only.
func TestDiagnosticHeadersOff(t *testing.T) {
	o := startObserved(t, "diagnostic_headers: false", ", params: true")
	h, _ := o.call(t, balanceCall, "")
	for k := range h {
		if strings.HasPrefix(k, "X-Venn-") {
			t.Errorf("switched off, the answer has %s", k)
		}
	}
	id := h.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no X-Request-Id")
	}
	_, l := o.line(t, id, 0)
	if p, _ := json.Marshal(l["params"]); string(p) != `["0x00000000000000000000000000000000000000aa","latest"]` {
		t.Errorf("params logged as %s", p)
	}
	const tx = "0x02f86b0180843b9aca00850df8475800825208940000000000000000000000000000000000000001880de0b6b3a764000080c0"
	h, _ = o.call(t, `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["`+tx+`"]}`, "")
	raw, l := o.line(t, h.Get("X-Request-Id"), 0)
	if h, _ := l["tx_hash"].(string); len(h) != 66 || strings.Contains(raw, tx[2:20]) || l["params"] != nil {
		t.Errorf("raw transaction logged as %s", raw)
	}
}

// TestLocalAnswerHeaders: once both remotes answered that they lack the
// state at an old block, a call for an older one is refused by venn
// itself (-32059, from what the remotes said before, no upstream call);
// its headers and its request log line name venn as the source, and no
// cache: not the remotes, not a cache miss.
func TestLocalAnswerHeaders(t *testing.T) {
	o := startObserved(t, "", "")
	pruned := func(m string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if m != "eth_getBalance" || !strings.Contains(string(params), `"0x5"`) {
			return nil, nil, false
		}
		return nil, &jrpc.Error{Code: -32000, Message: "missing trie node 0123 (path ) state 0x5 is not available"}, true
	}
	o.a.SetHook(pruned)
	o.b.SetHook(pruned)
	at := func(block string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","` + block + `"]}`
	}
	h, body := o.call(t, at("0x5"), "")
	if !strings.Contains(body, "missing trie node") || h.Get("X-Venn-Source") != "remotes" {
		t.Fatalf("the remotes' own answer: %s, source %q", body, h.Get("X-Venn-Source"))
	}
	calls := o.a.Calls("eth_getBalance") + o.b.Calls("eth_getBalance")

	h, body = o.call(t, at("0x4"), "pruned-1")
	if !strings.Contains(body, `"code":-32059`) {
		t.Fatalf("older block: %s, want -32059", body)
	}
	for k, want := range map[string]string{"X-Venn-Source": "local", "X-Venn-Cache": "none", "X-Venn-Attempts": "0", "X-Venn-Remote": ""} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if after := o.a.Calls("eth_getBalance") + o.b.Calls("eth_getBalance"); after != calls {
		t.Errorf("%d upstream calls for the -32059", after-calls)
	}
	if _, l := o.line(t, "pruned-1", 0); l["source"] != "local" || l["code"] != -32059.0 {
		t.Errorf("request log line %v, want source local, code -32059", l)
	}
}
