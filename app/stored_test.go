package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/internal/fakenode"
)

// storedReplica starts a replica of chain on the machine's Redis with
// auth.redis under tag, and returns its chain's URL.
func storedReplica(t *testing.T, id, chain, tag string, n *fakenode.Node) string {
	t.Helper()
	y := "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nlog: {level: error}\nshutdown_timeout: 5s\n" +
		"redis: {url: " + testRedisURL + ", replica_id: " + id + "}\n" +
		"auth:\n  redis: {enabled: true, refresh: 20ms, tag: " + tag + "}\n" +
		"chains:\n  - name: " + chain + "\n    chain_id: 1337\n    remotes:\n      - " + remoteYAML("a", n) + "\n"
	cfg, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	s := startApp(t, cfg)
	return "http://" + s.rpc.bound.String() + "/" + chain
}

// callWithKey posts body with key in X-Api-Key; the status and body.
func callWithKey(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", key)
	resp, err := replicaClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually calls check until it holds, at most every 20ms for 5s: the
// replicas look for a change every 20ms.
func eventually(t *testing.T, what string, check func() (bool, string)) {
	t.Helper()
	var last string
	for range 250 {
		ok, got := check()
		if ok {
			return
		}
		last = got
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: never; last %s", what, last)
}

// A tenant and a key written to Redis (as venn tenants writes them) are
// honoured by both replicas without a restart; a change to the tenant
// applies on both; a removed key is refused on both. Refusals name what
// is not allowed, never the key.
func TestStoredTenantsAndKeysOnTwoReplicas(t *testing.T) {
	chain, token := clusterChain(t, "stored")
	tag := "scopes-" + token
	n := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, n)
	urls := []string{storedReplica(t, "r1-"+token, chain, tag, n), storedReplica(t, "r2-"+token, chain, tag, n)}
	store, _, closeStore, err := (&Config{Redis: RedisConfig{URL: testRedisURL}, Edge: edge.Config{Auth: edge.AuthConfig{Redis: edge.StoredScopes{Tag: tag}}}}).ScopeStore()
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	ctx := context.Background()
	const secret = "stored-secret-0123456789"
	const chainID = `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`
	for _, u := range urls {
		if code, body := callWithKey(t, u, secret, chainID); code != http.StatusUnauthorized {
			t.Fatalf("a key not yet written: %d %s", code, body)
		}
	}

	tn := edge.Tenant{Name: "team-a", Chains: []string{chain}, Methods: []string{"eth_chainId", "eth_call"},
		Contracts: []string{"0x00000000000000000000000000000000000000aa"}}
	if err := store.PutTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if err := store.PutKey(ctx, edge.APIKey{Name: "k1", Key: secret, Tenant: "team-a"}); err != nil {
		t.Fatal(err)
	}
	for i, u := range urls {
		eventually(t, "the written key honoured by replica "+string(rune('1'+i)), func() (bool, string) {
			code, body := callWithKey(t, u, secret, chainID)
			return code == http.StatusOK && strings.Contains(body, `"0x539"`), body
		})
	}
	refusals := map[string]string{
		`{"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}`:  "eth_getBalance",
		`{"jsonrpc":"2.0","id":3,"method":"eth_call","params":[{"to":"0x00000000000000000000000000000000000000bb"},"latest"]}`: "0x00000000000000000000000000000000000000bb",
	}
	for _, u := range urls {
		for call, named := range refusals {
			_, body := callWithKey(t, u, secret, call)
			if !strings.Contains(body, `"error"`) || !strings.Contains(body, named) || strings.Contains(body, secret) || strings.Contains(body, "k1") {
				t.Errorf("refusal %s: %s, want an error naming %s and never the key", call, body, named)
			}
		}
	}

	tn.Methods = append(tn.Methods, "eth_getBalance")
	if err := store.PutTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	balance := `{"jsonrpc":"2.0","id":4,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}`
	for _, u := range urls {
		eventually(t, "the tenant's added method allowed", func() (bool, string) {
			_, body := callWithKey(t, u, secret, balance)
			return strings.Contains(body, `"result"`), body
		})
	}

	ws := dialWS(t, "ws"+strings.TrimPrefix(urls[1], "http"), http.Header{"X-Api-Key": {secret}})
	if ok, err := store.DeleteKey(ctx, "k1"); err != nil || !ok {
		t.Fatalf("DeleteKey: %v %v", ok, err)
	}
	for _, u := range urls {
		eventually(t, "the removed key refused", func() (bool, string) {
			code, body := callWithKey(t, u, secret, chainID)
			return code == http.StatusUnauthorized && !strings.Contains(body, secret), body
		})
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, _, err := ws.Read(rctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("a WebSocket opened with the removed key: %v, want closed with 1008", err)
	}
}
