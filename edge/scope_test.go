package edge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

const (
	contractA = "0x00000000000000000000000000000000000000aa"
	contractB = "0x00000000000000000000000000000000000000bb"
)

// nodeHandler answers like a node would, the same bytes whoever asks, and
// counts the calls that reach it.
func nodeHandler(reached *atomicCount) jrpc.Handler {
	return jrpc.HandlerFunc(func(_ context.Context, req *jrpc.Request) (json.RawMessage, error) {
		reached.add(req.Method)
		switch req.Method {
		case "eth_call":
			return json.RawMessage(`"0x000000000000000000000000000000000000000000000000000000000000002a"`), nil
		case "eth_getLogs":
			return json.RawMessage(`[{"address":"` + contractA + `","topics":[],"data":"0x","blockNumber":"0x1"}]`), nil
		case "eth_subscribe":
			return json.RawMessage(`"0x1"`), nil
		case "eth_blockNumber":
			return json.RawMessage(`"0x10"`), nil
		}
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method " + req.Method + " does not exist/is not available"}
	})
}

type atomicCount struct {
	mu chan struct{}
	m  map[string]int
}

func newCount() *atomicCount { return &atomicCount{mu: make(chan struct{}, 1), m: map[string]int{}} }

func (c *atomicCount) add(m string) {
	c.mu <- struct{}{}
	c.m[m]++
	<-c.mu
}

func (c *atomicCount) get(m string) int {
	c.mu <- struct{}{}
	defer func() { <-c.mu }()
	return c.m[m]
}

const scopedSecret = "scoped-0123456789abcdef"

func scopedConfig() Config {
	return Config{
		Auth: AuthConfig{Keys: []APIKey{
			{Name: "svc", Key: scopedSecret, Tenant: "team-a"},
			{Name: "wide", Key: aliceSecret},
			{Name: "elsewhere", Key: bobSecret, Tenant: "team-far"},
			{Name: "browser", Key: carolSecret, Tenant: "team-web"},
		}},
		Tenants: []Tenant{
			{Name: "team-a", Chains: []string{testChain}, Methods: []string{"eth_*"}, Block: []string{"eth_sendRawTransaction"},
				Contracts: []string{contractA}, CIDRs: []string{"127.0.0.0/8", "::1"}},
			{Name: "team-far", CIDRs: []string{"192.0.2.0/24"}},
			{Name: "team-web", CORS: []string{"https://app.team-web.example"}},
		},
	}
}

func callWith(method, params string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
}

func TestScopes(t *testing.T) {
	reached := newCount()
	reg := prometheus.NewRegistry()
	s := newTestServer(t, scopedConfig(), Options{Registerer: reg}, nodeHandler(reached))
	open := newTestServer(t, Config{}, Options{}, nodeHandler(newCount()))
	key := map[string]string{"X-Api-Key": scopedSecret}

	callA := callWith("eth_call", `[{"to":"`+contractA+`","data":"0x"},"latest"]`)
	callAUpper := callWith("eth_call", `[{"to":"`+strings.ToUpper(contractA[:2])+strings.ToUpper(contractA[2:])+`","data":"0x"},"latest"]`)
	tests := []struct {
		name       string
		give       string
		header     map[string]string
		wantStatus int
		want       string // the body holds it
		same       bool   // the body is the open server's, byte for byte
	}{
		{name: "eth_call to an allowed contract", give: callA, same: true},
		{name: "eth_call to an allowed contract in capitals", give: callAUpper, same: true},
		{name: "eth_call to another", give: callWith("eth_call", `[{"to":"`+contractB+`"},"latest"]`),
			want: `"code":-32056,"message":"unauthorized: contract ` + contractB + ` is not allowed for tenant team-a (contracts)"`},
		{name: "eth_estimateGas creating a contract", give: callWith("eth_estimateGas", `[{"data":"0x60"}]`),
			want: "eth_estimateGas must name a contract tenant team-a may use"},
		{name: "eth_getLogs of an allowed contract", give: callWith("eth_getLogs", `[{"address":"`+contractA+`","fromBlock":"0x1"}]`), same: true},
		{name: "eth_getLogs of a list with another", give: callWith("eth_getLogs", `[{"address":["`+contractA+`","`+contractB+`"]}]`),
			want: "contract " + contractB + " is not allowed"},
		{name: "eth_getLogs of every contract", give: callWith("eth_getLogs", `[{"fromBlock":"0x1"}]`),
			want: "eth_getLogs must name a contract"},
		{name: "eth_newFilter of every contract", give: callWith("eth_newFilter", `[{}]`), want: "eth_newFilter must name a contract"},
		{name: "a method off the tenant's list", give: callWith("net_version", `[]`),
			want: `"code":-32601,"message":"the method net_version does not exist/is not available"`},
		{name: "a method the tenant blocks", give: callWith("eth_sendRawTransaction", `["0x00"]`),
			want: "the method eth_sendRawTransaction does not exist/is not available"},
		{name: "an unscoped method", give: callWith("eth_blockNumber", `[]`), same: true},
		{name: "a key without a tenant is unscoped", give: callWith("eth_call", `[{"to":"`+contractB+`"},"latest"]`),
			header: map[string]string{"X-Api-Key": aliceSecret}, same: true},
		{name: "a tenant limited to other addresses", give: callWith("eth_blockNumber", `[]`), header: map[string]string{"X-Api-Key": bobSecret},
			wantStatus: 403, want: "unauthorized: tenant team-far may not call from this client address (cidrs)"},
		{name: "a tenant's origin", give: callWith("eth_blockNumber", `[]`),
			header: map[string]string{"X-Api-Key": carolSecret, "Origin": "https://app.team-web.example"}, same: true},
		{name: "another origin", give: callWith("eth_blockNumber", `[]`),
			header:     map[string]string{"X-Api-Key": carolSecret, "Origin": "https://evil.example"},
			wantStatus: 403, want: "unauthorized: origin not allowed for tenant team-web (cors)"},
		{name: "a tenant's origin is not every key's", give: callWith("eth_blockNumber", `[]`),
			header:     map[string]string{"X-Api-Key": aliceSecret, "Origin": "https://app.team-web.example"},
			wantStatus: 403, want: "origin not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = key
			}
			status, _, body := do(t, s, httpCall{header: h, body: tt.give})
			want := tt.wantStatus
			if want == 0 {
				want = 200
			}
			if status != want {
				t.Errorf("status %d, want %d: %s", status, want, body)
			}
			if tt.want != "" && !strings.Contains(body, tt.want) {
				t.Errorf("body %s, want %q", body, tt.want)
			}
			if tt.same {
				_, _, ref := do(t, open, httpCall{body: tt.give})
				if body != ref {
					t.Errorf("an allowed call's answer differs from an unscoped one:\n got %s\nwant %s", body, ref)
				}
			}
			for _, secret := range []string{scopedSecret, aliceSecret, bobSecret, carolSecret} {
				if strings.Contains(body, secret) {
					t.Errorf("the answer repeats a key: %s", body)
				}
			}
		})
	}
	if n := reached.get("eth_newFilter") + reached.get("eth_sendRawTransaction") + reached.get("net_version"); n != 0 {
		t.Errorf("refused calls reached the handler %d times", n)
	}
	if got := counterValue(t, reg, "venn_auth_rejections_total", map[string]string{"chain": testChain, "reason": "contract_not_allowed"}); got != 5 {
		t.Errorf("contract refusals counted %v, want 5", got)
	}

	// A batch: the refused item alone is refused; the others are answered
	// as they would be without scopes.
	batch := `[` + callA + `,` + callWith("eth_call", `[{"to":"`+contractB+`"},"latest"]`) + `,` + callWith("eth_blockNumber", `[]`) + `]`
	status, _, body := do(t, s, httpCall{header: key, body: batch})
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(body), &items); status != 200 || err != nil || len(items) != 3 {
		t.Fatalf("batch: %d %s", status, body)
	}
	_, _, refA := do(t, open, httpCall{body: callA})
	_, _, refN := do(t, open, httpCall{body: callWith("eth_blockNumber", `[]`)})
	if string(items[0]) != refA || string(items[2]) != refN || !strings.Contains(string(items[1]), "contract "+contractB+" is not allowed") {
		t.Errorf("batch answers: %s", body)
	}

	// Over WebSocket: a logs subscription to another contract is refused,
	// one to the tenant's is served.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{HTTPHeader: map[string][]string{"X-Api-Key": {scopedSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if got := wsCall(t, c, callWith("eth_subscribe", `["logs",{"address":"`+contractB+`"}]`)); !strings.Contains(got, "contract "+contractB+" is not allowed for tenant team-a") {
		t.Errorf("logs subscription to another contract: %s", got)
	}
	if got := wsCall(t, c, callWith("eth_subscribe", `["logs",{}]`)); !strings.Contains(got, "eth_subscribe must name a contract") {
		t.Errorf("logs subscription to every contract: %s", got)
	}
	if got := wsCall(t, c, callWith("eth_subscribe", `["logs",{"address":["`+contractA+`"]}]`)); got != `{"jsonrpc":"2.0","id":7,"result":"0x1"}` {
		t.Errorf("logs subscription to the tenant's contract: %s", got)
	}
	if got := wsCall(t, c, callWith("eth_subscribe", `["newHeads"]`)); got != `{"jsonrpc":"2.0","id":7,"result":"0x1"}` {
		t.Errorf("newHeads: %s", got)
	}
}

// TestTenantChainsAndRate: a tenant's chains refuse the request with 403,
// and its rate limit holds across its keys.
func TestTenantChainsAndRate(t *testing.T) {
	c := Config{
		Auth: AuthConfig{Keys: []APIKey{
			{Name: "one", Key: aliceSecret, Tenant: "t"},
			{Name: "two", Key: bobSecret, Tenant: "t"},
			{Name: "far", Key: carolSecret, Tenant: "elsewhere"},
		}},
		Tenants: []Tenant{{Name: "t", RateLimit: Rate{RPS: 0.001, Burst: 2}}, {Name: "elsewhere", Chains: []string{"other"}}},
	}
	s := newTestServer(t, c, Options{}, nodeHandler(newCount()))
	if status, _, body := do(t, s, httpCall{header: map[string]string{"X-Api-Key": carolSecret}, body: callOf("eth_blockNumber")}); status != 403 ||
		!strings.Contains(body, "unauthorized: tenant elsewhere may not use chain test") {
		t.Errorf("a chain off the tenant's: %d %s", status, body)
	}
	for i, k := range []string{aliceSecret, bobSecret, aliceSecret} {
		status, h, body := do(t, s, httpCall{header: map[string]string{"X-Api-Key": k}, body: callOf("eth_blockNumber")})
		if i < 2 && status != 200 {
			t.Errorf("call %d: %d %s", i, status, body)
		}
		if i == 2 && (status != 429 || h.Get("Retry-After") == "") {
			t.Errorf("the tenant's third call in its burst of 2: %d %s", status, body)
		}
	}
}

func TestTenantConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string
	}{
		{name: "bad contract", give: Config{Tenants: []Tenant{{Name: "a", Contracts: []string{"0x12"}}}}, want: "tenants[0].contracts[0]"},
		{name: "bad cidr", give: Config{Tenants: []Tenant{{Name: "a", CIDRs: []string{"10.0.0.0/99"}}}}, want: "tenants[0].cidrs[0]"},
		{name: "bad origin", give: Config{Tenants: []Tenant{{Name: "a", CORS: []string{"app.example"}}}}, want: "tenants[0].cors[0]"},
		{name: "unknown chain", give: Config{Tenants: []Tenant{{Name: "a", Chains: []string{"nope"}}}}, want: "tenants[0].chains[0]"},
		{name: "duplicate", give: Config{Tenants: []Tenant{{Name: "a"}, {Name: "a"}}}, want: "tenants[1].name"},
		{name: "unknown tenant of a key", give: Config{Auth: AuthConfig{Keys: []APIKey{{Name: "k", Key: aliceSecret, Tenant: "x"}}}},
			want: "auth.keys[0].tenant"},
		{name: "negative budget", give: Config{Tenants: []Tenant{{Name: "a", Credits: Budget{PerMinute: -1}}}}, want: "tenants[0].credits.per_minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.WithDefaults().Validate([]string{testChain})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
