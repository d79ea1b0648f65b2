package remotes

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// serveChain serves p as chain "test" of a jrpc server, as venn does,
// stopped at cleanup.
func serveChain(t *testing.T, p *Pool) string {
	t.Helper()
	return serveChainOn(t, jrpc.NewServer(jrpc.Options{}), p)
}

// serveChainOn is serveChain on the server s.
func serveChainOn(t *testing.T, s *jrpc.Server, p *Pool) string {
	t.Helper()
	s.Handle("test", poolHandler{p})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		ts.Close()
	})
	return ts.URL + "/test"
}

// poolHandler serves a pool as app's router does: each call parsed once
// and handed to ServeCall.
type poolHandler struct{ p *Pool }

func (h poolHandler) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	return h.p.ServeCall(ctx, evm.ParseCall(req.Method, req.Params))
}

func postWith(t *testing.T, url, body string, header map[string]string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHeaderPassthrough(t *testing.T) {
	chainWide := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	own := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{ForwardHeaders: []string{"x-provider-route"}},
		[]*fakenode.Node{chainWide, own}, func(i int, c *Config) {
			c.Headers = map[string]string{"X-Api-Key": "provider-secret-0123456789"}
			if i == 1 {
				c.ForwardHeaders = []string{"X-Tenant-Hint"}
				c.ForwardClientIP = true
				c.Tier = TierFallback // served only when n0 fails
			}
		})
	url := serveChain(t, p)
	names := []string{"X-Provider-Route", "X-Tenant-Hint", "X-Forwarded-For", "X-Api-Key", "Authorization"}
	chainWide.WatchHeaders(names...)
	own.WatchHeaders(names...)

	hdr := map[string]string{"X-Provider-Route": "eu-west", "X-Tenant-Hint": "team-a",
		"X-Api-Key": "venn-client-key-0123456789", "Authorization": "Bearer client.jwt.token"}
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","0x1"]}`
	if got := postWith(t, url, call, hdr); !strings.Contains(got, `"result"`) {
		t.Fatalf("answer %s", got)
	}
	// n0 forwards the chain's header only, never the client's credentials,
	// and no address (off by default). venn's own calls (heads) carry none.
	if got := chainWide.HeaderValues("X-Provider-Route"); got["eu-west"] != 1 {
		t.Errorf("n0 got X-Provider-Route %v, want eu-west once", got)
	}
	if got := chainWide.HeaderValues("X-Api-Key"); got["venn-client-key-0123456789"] != 0 || got["provider-secret-0123456789"] == 0 {
		t.Errorf("n0 got X-Api-Key %v: want the remote's own, never the client's", got)
	}
	for _, name := range []string{"X-Tenant-Hint", "X-Forwarded-For", "Authorization"} {
		for v := range chainWide.HeaderValues(name) {
			if v != "" {
				t.Errorf("n0 got %s: %q, want none", name, v)
			}
		}
	}

	// n1 forwards both lists and the client's address.
	chainWide.SetFailStatus(503)
	own.WatchHeaders(names...)
	if got := postWith(t, url, strings.Replace(call, "0x1", "0x2", 1), hdr); !strings.Contains(got, `"result"`) {
		t.Fatalf("answer from n1: %s", got)
	}
	for name, v := range map[string]string{"X-Provider-Route": "eu-west", "X-Tenant-Hint": "team-a", "X-Forwarded-For": "127.0.0.1"} {
		if got := own.HeaderValues(name); got[v] != 1 {
			t.Errorf("n1 got %s %v, want %q once", name, got, v)
		}
	}
	for v := range own.HeaderValues("Authorization") {
		if v != "" {
			t.Errorf("n1 got the client's Authorization")
		}
	}
	if got := own.HeaderValues("X-Api-Key"); got["venn-client-key-0123456789"] != 0 {
		t.Errorf("n1 got the client's venn key: %v", got)
	}
}

func TestForwardHeadersValidate(t *testing.T) {
	for _, name := range []string{"Authorization", "x-api-key", "Cookie", "Host", "X-Forwarded-For", "Idempotency-Key", "bad header"} {
		c := Config{Name: "a", URL: "http://127.0.0.1:1", ForwardHeaders: []string{name}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "forward_headers") {
			t.Errorf("forward_headers [%s]: %v, want refused", name, err)
		}
	}
	c := Config{Name: "a", URL: "http://127.0.0.1:1", ForwardHeaders: []string{"X-Provider-Route"}}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	// A remote's own header of that name would make writes replayable.
	for _, name := range []string{"Idempotency-Key", "x-idempotency-key"} {
		c := Config{Name: "a", URL: "http://127.0.0.1:1", Headers: map[string]string{name: "k"}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "headers") {
			t.Errorf("headers {%s}: %v, want refused", name, err)
		}
	}
}
