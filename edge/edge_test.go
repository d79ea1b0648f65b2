package edge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// Secrets of the test keys. They must never come back in an answer.
const (
	aliceSecret = "alice-0123456789abcdef"
	bobSecret   = "bob-0123456789abcdef01"
	carolSecret = "carol-0123456789abcdef"
)

// edgeHandler serves the methods of echoHandler plus a few that look like
// the node's, and counts what reaches it: a blocked call must not.
func edgeHandler(reached *[]string, mu chan struct{}) jrpc.Handler {
	echo := echoHandler()
	return jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		mu <- struct{}{}
		*reached = append(*reached, req.Method)
		<-mu
		switch {
		case strings.HasPrefix(req.Method, "eth_"), strings.HasPrefix(req.Method, "debug_"),
			strings.HasPrefix(req.Method, "admin_"), strings.HasPrefix(req.Method, "net_"):
			return json.RawMessage(`"ok"`), nil
		case req.Method == "test_key":
			p, _ := jrpc.PeerFromContext(ctx)
			return json.Marshal(p.Key)
		}
		return echo.ServeRPC(ctx, req)
	})
}

// httpCall is one request of a table test.
type httpCall struct {
	method string // HTTP method; default POST
	path   string // after the server's URL; default /test
	header map[string]string
	body   string
}

// do sends c to s and returns the status, headers and body.
func do(t *testing.T, s *testServer, c httpCall) (int, http.Header, string) {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.path == "" {
		c.path = "/" + testChain
	}
	req, err := http.NewRequest(c.method, s.ts.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func callOf(method string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":[]}`
}

func TestAPIKeys(t *testing.T) {
	reg := prometheus.NewRegistry()
	var reached []string
	mu := make(chan struct{}, 1)
	s := newTestServer(t, Config{Auth: AuthConfig{Keys: []APIKey{
		{Name: "alice", Key: aliceSecret},
		{Name: "bob", Key: bobSecret, Chains: []string{"other"}},
		{Name: "carol", Key: carolSecret, Methods: []string{"eth_", "test_key", "debug_traceCall"}, Enable: []string{"debug_trace*"}},
	}}}, Options{Registerer: reg}, edgeHandler(&reached, mu))
	s.Handle("other", edgeHandler(&reached, mu))

	tests := []struct {
		name       string
		give       httpCall
		wantStatus int
		wantBody   string // exact, when the call is served
		wantCode   int    // the error's code otherwise
		wantMsg    string // substring of its message
	}{
		{name: "key in header", give: httpCall{header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("test_key")},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":"alice"}`},
		{name: "key in path", give: httpCall{path: "/test/" + aliceSecret, body: callOf("test_key")},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":"alice"}`},
		{name: "same key in path and header", give: httpCall{path: "/test/" + aliceSecret,
			header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("test_key")},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":"alice"}`},
		{name: "two different keys", give: httpCall{path: "/test/" + aliceSecret,
			header: map[string]string{"X-Api-Key": carolSecret}, body: callOf("test_key")},
			wantStatus: 401, wantCode: jrpc.CodeUnauthorized, wantMsg: "invalid API key"},
		{name: "no key", give: httpCall{body: callOf("test_key")},
			wantStatus: 401, wantCode: jrpc.CodeUnauthorized, wantMsg: "X-Api-Key header"},
		{name: "wrong key", give: httpCall{header: map[string]string{"X-Api-Key": aliceSecret + "x"}, body: callOf("test_key")},
			wantStatus: 401, wantCode: jrpc.CodeUnauthorized, wantMsg: "invalid API key"},
		{name: "wrong key in path", give: httpCall{path: "/test/nope", body: callOf("test_key")},
			wantStatus: 401, wantCode: jrpc.CodeUnauthorized, wantMsg: "invalid API key"},
		{name: "key refused before the body is read", give: httpCall{body: `{`},
			wantStatus: 401, wantCode: jrpc.CodeUnauthorized},
		{name: "unknown chain hides the path key", give: httpCall{path: "/nochain/" + aliceSecret, body: callOf("test_key")},
			wantStatus: 404, wantCode: jrpc.CodeUnknownChain, wantMsg: `"/nochain"`},
		{name: "key limited to other chains", give: httpCall{header: map[string]string{"X-Api-Key": bobSecret}, body: callOf("test_key")},
			wantStatus: 403, wantCode: jrpc.CodeUnauthorized, wantMsg: "may not use chain test"},
		{name: "key on its chain", give: httpCall{path: "/other", header: map[string]string{"X-Api-Key": bobSecret}, body: callOf("test_key")},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":"bob"}`},
		{name: "allowlist lets eth_ through", give: httpCall{header: map[string]string{"X-Api-Key": carolSecret}, body: callOf("eth_call")},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":"ok"}`},
		{name: "not on the key's allowlist", give: httpCall{header: map[string]string{"X-Api-Key": carolSecret}, body: callOf("net_version")},
			wantStatus: 200, wantCode: jrpc.CodeMethodNotFound, wantMsg: "the method net_version does not exist/is not available"},
		{name: "blocked method the key enables", give: httpCall{header: map[string]string{"X-Api-Key": carolSecret}, body: callOf("debug_traceCall")},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":"ok"}`},
		{name: "blocked method for other keys", give: httpCall{header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("debug_traceCall")},
			wantStatus: 200, wantCode: jrpc.CodeMethodNotFound, wantMsg: "the method debug_traceCall does not exist/is not available"},
		{name: "batch answers each call", give: httpCall{header: map[string]string{"X-Api-Key": carolSecret},
			body: `[{"jsonrpc":"2.0","id":1,"method":"eth_call"},{"jsonrpc":"2.0","id":2,"method":"admin_peers"}]`},
			wantStatus: 200, wantBody: `[{"jsonrpc":"2.0","id":1,"result":"ok"},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"the method admin_peers does not exist/is not available"}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, s, tt.give)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d (%s)", status, tt.wantStatus, body)
			}
			for _, secret := range []string{aliceSecret, bobSecret, carolSecret} {
				if strings.Contains(body, secret) {
					t.Errorf("answer repeats a key: %s", body)
				}
			}
			if tt.wantBody != "" {
				if body != tt.wantBody {
					t.Errorf("body = %s, want %s", body, tt.wantBody)
				}
				return
			}
			var resp struct{ Error *jrpc.Error }
			if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Error == nil {
				t.Fatalf("body %s: want an error (%v)", body, err)
			}
			if resp.Error.Code != tt.wantCode || !strings.Contains(resp.Error.Message, tt.wantMsg) {
				t.Errorf("error = %d %q, want %d containing %q", resp.Error.Code, resp.Error.Message, tt.wantCode, tt.wantMsg)
			}
		})
	}

	for _, m := range reached {
		if m == "admin_peers" || m == "net_version" {
			t.Errorf("blocked method %s reached the handler", m)
		}
	}
	for reason, want := range map[string]float64{
		"missing_key": 2, "invalid_key": 3, "chain_not_allowed": 1, "method_not_allowed": 1, "method_blocked": 2,
	} {
		if got := counterValue(t, reg, "venn_auth_rejections_total", map[string]string{"chain": "test", "reason": reason}); got != want {
			t.Errorf("venn_auth_rejections_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

func TestAPIKeyInAuthorization(t *testing.T) {
	s := newTestServer(t, Config{Auth: AuthConfig{Header: "authorization",
		Keys: []APIKey{{Name: "alice", Key: aliceSecret}}}}, Options{}, echoHandler())
	tests := []struct {
		give       string
		wantStatus int
	}{
		{give: "Bearer " + aliceSecret, wantStatus: 200},
		{give: "bearer " + aliceSecret, wantStatus: 200},
		{give: aliceSecret, wantStatus: 401},
		{give: "Basic " + aliceSecret, wantStatus: 401},
	}
	for _, tt := range tests {
		status, _, body := do(t, s, httpCall{header: map[string]string{"Authorization": tt.give}, body: callOf("test_echo")})
		if status != tt.wantStatus {
			t.Errorf("Authorization %.12q...: status = %d, want %d (%s)", tt.give, status, tt.wantStatus, body)
		}
	}
}

// TestOpenWithoutKeys: no keys, venn is open as before, and /CHAIN/x is no
// route.
func TestOpenWithoutKeys(t *testing.T) {
	s := newTestServer(t, Config{}, Options{}, echoHandler())
	if status, _, body := do(t, s, httpCall{body: callOf("test_echo")}); status != 200 || strings.Contains(body, "error") {
		t.Errorf("open call = %d %s", status, body)
	}
	if status, _, _ := do(t, s, httpCall{path: "/test/" + aliceSecret, body: callOf("test_echo")}); status != 404 {
		t.Errorf("/test/KEY without keys = %d, want 404", status)
	}
}

func TestMethodBlocklist(t *testing.T) {
	tests := []struct {
		name   string
		policy MethodPolicy
		give   string
		want   bool // served
	}{
		{name: "eth_ passes", give: "eth_getBalance", want: true},
		{name: "admin_ blocked", give: "admin_addPeer"},
		{name: "personal_ blocked", give: "personal_unlockAccount"},
		{name: "miner_ blocked", give: "miner_start"},
		{name: "debug_ blocked", give: "debug_setHead"},
		{name: "engine_ blocked", give: "engine_forkchoiceUpdatedV3"},
		{name: "clique_ blocked", give: "clique_propose"},
		{name: "a namespace merely starting alike passes", give: "debugx_foo", want: true},
		{name: "no namespace passes", give: "debug", want: true},
		{name: "enable a prefix", policy: MethodPolicy{Enable: []string{"debug_trace*"}}, give: "debug_traceTransaction", want: true},
		{name: "enable leaves the rest", policy: MethodPolicy{Enable: []string{"debug_trace*"}}, give: "debug_setHead"},
		{name: "enable a namespace", policy: MethodPolicy{Enable: []string{"debug_"}}, give: "debug_getRawBlock", want: true},
		{name: "enable one method", policy: MethodPolicy{Enable: []string{"admin_nodeInfo"}}, give: "admin_nodeInfo", want: true},
		{name: "block more", policy: MethodPolicy{Block: []string{"eth_sendRawTransaction"}}, give: "eth_sendRawTransaction"},
		{name: "block beats enable", policy: MethodPolicy{Enable: []string{"debug_"}, Block: []string{"debug_setHead"}}, give: "debug_setHead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := tt.policy.checkScoped(tt.give, nil)
			if got != tt.want {
				t.Errorf("check(%q) served = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
	if got := DefaultBlockedMethods(); len(got) != 6 {
		t.Errorf("DefaultBlockedMethods = %v", got)
	}
	for _, m := range DefaultBlockedMethods() {
		if !defaultBlocked(m + "x") {
			t.Errorf("%s is in DefaultBlockedMethods but not blocked", m)
		}
	}

	// Over the wire, as geth answers a method it does not expose, and no
	// handler call.
	var reached []string
	mu := make(chan struct{}, 1)
	s := newTestServer(t, Config{}, Options{}, edgeHandler(&reached, mu))
	_, _, body := do(t, s, httpCall{body: callOf("admin_nodeInfo")})
	if want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"the method admin_nodeInfo does not exist/is not available"}}`; body != want {
		t.Errorf("admin_nodeInfo = %s, want %s", body, want)
	}
	if len(reached) != 0 {
		t.Errorf("handler called for %v", reached)
	}
}

func TestWSAuth(t *testing.T) {
	s := newTestServer(t, Config{Auth: AuthConfig{Keys: []APIKey{
		{Name: "alice", Key: aliceSecret, Methods: []string{"test_echo"}},
	}}}, Options{}, echoHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, resp, err := websocket.Dial(ctx, s.wsURL(), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upgrade without a key: err %v, resp %v; want 401", err, resp)
	}

	for _, tc := range []struct {
		name string
		url  string
		opts *websocket.DialOptions
	}{
		{name: "header", url: s.wsURL(), opts: &websocket.DialOptions{HTTPHeader: http.Header{"X-Api-Key": {aliceSecret}}}},
		{name: "path", url: s.wsURL() + "/" + aliceSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := websocket.Dial(ctx, tc.url, tc.opts)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.CloseNow()
			testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]}`)
			if got := testkit.WSRead(t, c); got != `{"jsonrpc":"2.0","id":1,"result":[1]}` {
				t.Errorf("allowed call = %s", got)
			}
			testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":2,"method":"sum","params":[1]}`)
			if got := testkit.WSRead(t, c); !strings.Contains(got, `"code":-32601`) {
				t.Errorf("call off the key's allowlist = %s, want -32601", got)
			}
		})
	}
}

// Permitted says what Admit and Check would let a caller call, and counts
// no refusal for asking.
func TestPermitted(t *testing.T) {
	methods := []string{"debug_getRawBlock", "debug_traceCall", "eth_blockNumber", "eth_sendRawTransaction", "net_version"}
	policy := MethodPolicy{Enable: []string{"debug_trace*"}, Block: []string{"eth_sendRawTransaction"}}
	reg := prometheus.NewRegistry()
	keyed := New(Config{Methods: policy, Auth: AuthConfig{Keys: []APIKey{
		{Name: "alice", Key: aliceSecret},
		{Name: "bob", Key: bobSecret, Chains: []string{"other"}},
		{Name: "carol", Key: carolSecret, Methods: []string{"eth_", "net_version"}},
	}}}, Options{Registerer: reg})
	open := New(Config{Methods: policy}, Options{})
	tests := []struct {
		name string
		edge *Edge
		key  string
		want []string
	}{
		{name: "open", edge: open, want: []string{"debug_traceCall", "eth_blockNumber", "net_version"}},
		{name: "a key held to the methods section", edge: keyed, key: aliceSecret, want: []string{"debug_traceCall", "eth_blockNumber", "net_version"}},
		{name: "a key with an allowlist", edge: keyed, key: carolSecret, want: []string{"eth_blockNumber", "net_version"}},
		{name: "a key without the chain", edge: keyed, key: bobSecret},
		{name: "no key", edge: keyed},
		{name: "a wrong key", edge: keyed, key: "wrong-key-0123456789abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/"+testChain, nil)
			if tt.key != "" {
				r.Header.Set(DefaultKeyHeader, tt.key)
			}
			got := tt.edge.Permitted(r, jrpc.Admission{Chain: testChain, Transport: "grpc"}, methods)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Permitted = %v, want %v", got, tt.want)
			}
		})
	}
	for _, reason := range []string{"missing_key", "invalid_key", "chain_not_allowed"} {
		if got := counterValue(t, reg, "venn_auth_rejections_total", map[string]string{"chain": testChain, "reason": reason}); got != 0 {
			t.Errorf("%s counted %v times for asking", reason, got)
		}
	}
}
