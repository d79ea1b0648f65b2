package app

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// keysYAML is the auth section with keys alice and bob; bobMore is
// added to bob's entry.
func keysYAML(alice bool, bobMore string) string {
	y := "auth:\n  keys:\n"
	if alice {
		y += "    - {name: alice, key: alice-secret-0123456789}\n"
	}
	return y + "    - {name: bob, key: bob-secret-0123456789" + bobMore + "}\n"
}

func dialWS(t *testing.T, url string, h http.Header) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// A reload that revokes a key closes the WebSocket connections opened
// with it, by header or by path, with a close frame and a reason; a
// connection whose key stays goes by the key's new methods and rate
// limit from its next call.
func TestReloadRevokesKeysOnOpenConnections(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a)
	remotes := []string{remoteYAML("a", a)}
	app := startReloadApp(t, keysYAML(true, "")+reloadYAML("warn", remotes, ""))
	alice := dialWS(t, app.ws("test"), http.Header{"X-Api-Key": {"alice-secret-0123456789"}})
	alicePath := dialWS(t, app.ws("test")+"/alice-secret-0123456789", nil)
	aliceSub := subscribeHeads(t, app.ws("test")+"/alice-secret-0123456789")
	bob := dialWS(t, app.ws("test"), http.Header{"X-Api-Key": {"bob-secret-0123456789"}})
	for _, c := range []*websocket.Conn{alice, alicePath, bob} {
		testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
		if got := testkit.WSRead(t, c); !strings.Contains(got, `"0x539"`) {
			t.Fatalf("eth_chainId before the reload: %s", got)
		}
	}

	rep := app.reload(t, keysYAML(false, ", methods: [eth_chainId, eth_blockNumber], rate_limit: {rps: 0.001, burst: 2}")+
		reloadYAML("warn", remotes, ""))
	if !rep.Applied || !slices.ContainsFunc(rep.Changes, func(s string) bool { return strings.Contains(s, "(3 no longer admitted: closed)") }) {
		t.Errorf("report %+v", rep)
	}
	for _, c := range []*websocket.Conn{alice, alicePath} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _, err := c.Read(ctx)
		cancel()
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "invalid API key") {
			t.Errorf("revoked key's connection: %v, want close 1008 saying why", err)
		}
	}
	select {
	case <-aliceSub.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked key's subscription still streams")
	}
	if _, err := aliceSub.seen(); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("revoked key's subscription: %v, want close 1008", err)
	}
	testkit.WSWrite(t, bob, `{"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}`)
	if got := testkit.WSRead(t, bob); !strings.Contains(got, `"code":-32601`) {
		t.Errorf("bob's eth_getBalance, off his new method list: %s", got)
	}
	testkit.WSWrite(t, bob, `{"jsonrpc":"2.0","id":3,"method":"eth_chainId","params":[]}`)
	if got := testkit.WSRead(t, bob); !strings.Contains(got, `"0x539"`) {
		t.Errorf("bob's second call under his new rate limit: %s", got)
	}
	testkit.WSWrite(t, bob, `{"jsonrpc":"2.0","id":4,"method":"eth_chainId","params":[]}`)
	if got := testkit.WSRead(t, bob); !strings.Contains(got, "rate limited") {
		t.Errorf("bob's third call under a burst of 2: %s", got)
	}
}

// A reload's subscription limits apply to the chains already running, on
// the connections already open.
func TestReloadSubscriptionLimits(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a)
	remotes := []string{remoteYAML("a", a)}
	app := startReloadApp(t, "limits: {max_subscriptions_per_connection: 1}\n"+reloadYAML("warn", remotes, ""))
	c := dialWS(t, app.ws("test"), nil)
	subscribe := func(id string) string {
		testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":`+id+`,"method":"eth_subscribe","params":["newHeads"]}`)
		for { // notifications of the first subscription come in between
			if got := testkit.WSRead(t, c); strings.Contains(got, `"id":`+id) {
				return got
			}
		}
	}
	subscribe("1")
	if got := subscribe("2"); !strings.Contains(got, "max_subscriptions_per_connection (1)") {
		t.Fatalf("a second subscription at 1: %s", got)
	}
	rep := app.reload(t, "limits: {max_subscriptions_per_connection: 2}\n"+reloadYAML("warn", remotes, ""))
	if !rep.Applied || len(rep.RestartRequired) != 0 {
		t.Errorf("report %+v", rep)
	}
	if got := subscribe("3"); !strings.Contains(got, `"result":"0x`) {
		t.Errorf("a second subscription after the reload raised the limit to 2: %s", got)
	}
}
