package remotes

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

const rawTx = `["0x02f86b0180843b9aca00850df8475800825208940000000000000000000000000000000000000001880de0b6b3a764000080c0"]`

func TestShadowDiffersCountedNeverServed(t *testing.T) {
	pub := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	sh := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	// The shadow's balances are off by one; its blocks are the same chain.
	sh.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" {
			return json.RawMessage(`"0xdeadbeef"`), nil, true
		}
		return nil, nil, false
	})
	m := NewMetrics(nil)
	rs := testConfigs([]string{pub.URL(), sh.URL()}, func(i int, c *Config) {
		if i == 1 {
			c.Name, c.Shadow, c.ShadowSample = "shadow", true, 1
		}
	})
	p := startPool(t, PoolConfig{}, rs, m)
	if names := memberNames(p); len(names) != 1 || names[0] != "n0" {
		t.Fatalf("pool members %v: a shadow is none", names)
	}
	const calls = 5
	for i := range calls {
		res, err := call(t, p, "eth_getBalance", fmt.Sprintf(`["0x00000000000000000000000000000000000000aa","0x%x"]`, 5+i))
		if err != nil {
			t.Fatal(err)
		}
		if string(res) == `"0xdeadbeef"` {
			t.Fatalf("the shadow's answer was served")
		}
	}
	for i := range 3 {
		if _, err := call(t, p, "eth_getBlockByNumber", fmt.Sprintf(`["0x%x",false]`, 1+i)); err != nil {
			t.Fatal(err)
		}
	}
	count := func(method, outcome string) float64 {
		return testutil.ToFloat64(m.sd.Shadow.WithLabelValues("test", "shadow", method, outcome))
	}
	waitFor(t, "the shadow's answers compared", func() bool {
		return count("eth_getBalance", "mismatch") == calls && count("eth_getBlockByNumber", "match") == 3
	})
	if n := count("eth_getBalance", "match"); n != 0 {
		t.Errorf("%v differing balances counted as matches", n)
	}
	if got := sh.Calls("eth_getBalance"); got != calls {
		t.Errorf("the shadow got %d balance calls, want a copy of each of %d", got, calls)
	}

	// With the public remote down the shadow serves nothing.
	pub.SetFailStatus(503)
	if _, err := call(t, p, "eth_getBalance", `["0x00000000000000000000000000000000000000aa","0x9"]`); wireCode(err) != jrpc.CodeNoRemote {
		t.Errorf("public remote down: %v, want -32050 (a shadow never serves)", err)
	}
}

func memberNames(p *Pool) []string {
	var names []string
	for _, r := range p.members() {
		names = append(names, r.cfg.Name)
	}
	return names
}

func TestPrivateRouteNeverReachesPublic(t *testing.T) {
	pub1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	pub2 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	relay1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	relay2 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	bundler := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	bundler.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_supportedEntryPoints" {
			return json.RawMessage(`["0x0000000071727De22E5E9d8BAf0edAc6f37da032"]`), nil, true
		}
		return nil, nil, false
	})
	m := NewMetrics(nil)
	rs := testConfigs([]string{pub1.URL(), pub2.URL(), relay1.URL(), relay2.URL(), bundler.URL()}, func(i int, c *Config) {
		switch i {
		case 2, 3:
			c.Group = "relays"
		case 4:
			c.Group = "bundlers"
		}
	})
	p := startPool(t, PoolConfig{BroadcastFanout: 2, TxRoutes: []TxRoute{
		{Methods: []string{"eth_sendRawTransaction", "eth_sendBundle"}, Group: "relays"},
		{Methods: []string{"eth_supportedEntryPoints", "eth_sendUserOperation"}, Group: "bundlers"},
	}}, rs, m)
	public := func() int64 {
		return pub1.Calls("eth_sendRawTransaction") + pub2.Calls("eth_sendRawTransaction")
	}

	for range 4 {
		if _, err := call(t, p, "eth_sendRawTransaction", rawTx); err != nil {
			t.Fatal(err)
		}
	}
	if got := relay1.Calls("eth_sendRawTransaction") + relay2.Calls("eth_sendRawTransaction"); got != 4 {
		t.Errorf("relays got %d sends, want 4", got)
	}
	if relay1.Calls("eth_sendRawTransaction") == 0 || relay2.Calls("eth_sendRawTransaction") == 0 {
		t.Errorf("sends not spread over the group: %d, %d", relay1.Calls("eth_sendRawTransaction"), relay2.Calls("eth_sendRawTransaction"))
	}
	if res, err := call(t, p, "eth_supportedEntryPoints", `[]`); err != nil || !strings.Contains(string(res), "0x0000000071727De22E5E9d8BAf0edAc6f37da032") {
		t.Errorf("bundler method: %s, %v", res, err)
	}

	// One relay down: the other takes every send.
	relay1.SetFailStatus(503)
	before := relay2.Calls("eth_sendRawTransaction")
	for range 3 {
		if _, err := call(t, p, "eth_sendRawTransaction", rawTx); err != nil {
			t.Fatalf("one relay down: %v", err)
		}
	}
	if got := relay2.Calls("eth_sendRawTransaction") - before; got != 3 {
		t.Errorf("the live relay got %d of 3 sends", got)
	}

	// Both down: the send fails, and still no public remote sees it.
	relay2.SetFailStatus(503)
	_, err := call(t, p, "eth_sendRawTransaction", rawTx)
	if wireCode(err) != jrpc.CodeNoRemote || !strings.Contains(err.Error(), "group relays") || !strings.Contains(err.Error(), "not sent to public remotes") {
		t.Errorf("group down: %v, want -32050 naming the group", err)
	}
	if got := public(); got != 0 {
		t.Fatalf("public remotes got %d private transactions", got)
	}
	if got := testutil.ToFloat64(m.sd.Routes.WithLabelValues("test", "relays", "failed")); got != 1 {
		t.Errorf("venn_tx_route_calls_total{outcome=failed} = %v, want 1", got)
	}

	// Only a route that says so falls back to the public broadcast.
	if _, err := p.Reconfigure(PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: p.conf().BlockTime,
		CallDeadline: p.conf().CallDeadline, BroadcastFanout: 2, Availability: noProbe(), TxRoutes: []TxRoute{
			{Methods: []string{"eth_sendRawTransaction"}, Group: "relays", FallbackPublic: true},
		}}, rs); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, p, "eth_sendRawTransaction", rawTx); err != nil {
		t.Fatalf("fallback_public: %v", err)
	}
	waitFor(t, "the public broadcast", func() bool { return public() > 0 })
}

func TestTenantRoute(t *testing.T) {
	pub := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	relay := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	rs := testConfigs([]string{pub.URL(), relay.URL()}, func(i int, c *Config) {
		if i == 1 {
			c.Group = "protect"
		}
	})
	p := startPool(t, PoolConfig{TxRoutes: []TxRoute{
		{Methods: []string{"eth_sendRawTransaction"}, Group: "protect", Tenants: []string{"team-a"}},
	}}, rs, nil)
	e := edge.New(edge.Config{Auth: edge.AuthConfig{Keys: []edge.APIKey{
		{Name: "team-a", Key: "team-a-key-0123456789"}, {Name: "team-b", Key: "team-b-key-0123456789"},
	}}}.WithDefaults(), edge.Options{})
	s := jrpc.NewServer(jrpc.Options{Gate: e})
	url := serveChainOn(t, s, p)
	send := `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":` + rawTx + `}`

	if got := postWith(t, url, send, map[string]string{"X-Api-Key": "team-a-key-0123456789"}); !strings.Contains(got, `"result"`) {
		t.Fatalf("team-a: %s", got)
	}
	if relay.Calls("eth_sendRawTransaction") != 1 || pub.Calls("eth_sendRawTransaction") != 0 {
		t.Errorf("team-a's send: relay %d, public %d; want the relay only",
			relay.Calls("eth_sendRawTransaction"), pub.Calls("eth_sendRawTransaction"))
	}
	if got := postWith(t, url, send, map[string]string{"X-Api-Key": "team-b-key-0123456789"}); !strings.Contains(got, `"result"`) {
		t.Fatalf("team-b: %s", got)
	}
	waitFor(t, "team-b's public broadcast", func() bool { return pub.Calls("eth_sendRawTransaction") == 1 })
	if relay.Calls("eth_sendRawTransaction") != 1 {
		t.Errorf("team-b's send reached the private relay")
	}
}

func TestSideValidate(t *testing.T) {
	rs := []Config{
		{Name: "pub", URL: "http://127.0.0.1:1"},
		{Name: "s", URL: "ws://127.0.0.1:2", Shadow: true, Group: "g", ShadowSample: 2},
	}
	err := PoolConfig{TxRoutes: []TxRoute{{Group: "nope"}, {Methods: []string{"m"}, Group: "g"}, {Methods: []string{"m"}, Group: "g"}}}.
		WithDefaults(2).Validate(rs)
	for _, want := range []string{
		"remotes[1].shadow: a remote is a shadow or in a group, not both",
		"remotes[1].shadow_sample: must be in [0, 1]",
		"remotes[1].url: must be http(s):// for a shadow",
		`transaction_routes[0].group: "nope": no remote of the chain is in this group`,
		"transaction_routes[0].methods: at least one method is required",
		"transaction_routes[2].methods[0]: m is routed by transaction_routes[1] too",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	only := PoolConfig{}.WithDefaults(1).Validate([]Config{{Name: "s", URL: "http://127.0.0.1:2", Shadow: true}})
	if only == nil || !strings.Contains(only.Error(), "at least one remote must be neither a shadow nor in a group") {
		t.Errorf("only a shadow: %v", only)
	}
}
