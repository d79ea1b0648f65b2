package jrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/venn-gateway/venn/internal/testkit"
)

// chainHandler answers test_chain with its chain's name, so a test sees
// which chain a path reached.
func chainHandler(name string) Handler {
	return HandlerFunc(func(context.Context, *Request) (json.RawMessage, error) {
		return json.Marshal(name)
	})
}

// pathServer serves chains (each answering test_chain with its name),
// with opts.
func pathServer(t *testing.T, opts Options, chains ...string) *testServer {
	t.Helper()
	s := newTestServer(t, opts, chainHandler(chains[0]))
	for _, c := range chains[1:] {
		s.Handle(c, chainHandler(c))
	}
	return s
}

// pathWant is what a request to a path must get: the chain that answers,
// or a 404 whose JSON-RPC error names every chain path.
type pathWant struct {
	chain string   // "" for a 404
	paths []string // the chain paths a 404 lists
}

// checkHTTPPath posts test_chain to path and checks the answer.
func checkHTTPPath(t *testing.T, s *testServer, path string, want pathWant) {
	t.Helper()
	resp, err := s.ts.Client().Post(s.ts.URL+path, "application/json", strings.NewReader(callOf("test_chain")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want.chain != "" {
		if wantBody := `{"jsonrpc":"2.0","id":1,"result":"` + want.chain + `"}`; resp.StatusCode != 200 || string(body) != wantBody {
			t.Errorf("POST %s: %d %s, want 200 %s", path, resp.StatusCode, body, wantBody)
		}
		return
	}
	checkNotFound(t, "POST "+path, resp, body, want.paths)
}

// checkNotFound checks a 404 answer: a JSON-RPC error, -32053, whose
// message and data list the chain paths.
func checkNotFound(t *testing.T, what string, resp *http.Response, body []byte, paths []string) {
	t.Helper()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: %d %q %s, want 404 with a JSON-RPC error", what, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		return
	}
	e := decodeErrorBody(t, body)
	if e.Code != CodeUnknownChain {
		t.Errorf("%s: code %d, want %d", what, e.Code, CodeUnknownChain)
	}
	for _, p := range paths {
		if !strings.Contains(e.Message, p) {
			t.Errorf("%s: message %q does not name %s", what, e.Message, p)
		}
	}
	var data struct {
		Chains []string `json:"chains"`
	}
	if err := json.Unmarshal(e.Data, &data); err != nil || strings.Join(data.Chains, " ") != strings.Join(paths, " ") {
		t.Errorf("%s: data %s, want {\"chains\": %q}", what, e.Data, paths)
	}
}

// checkWSPath opens a WebSocket at path and calls test_chain on it.
func checkWSPath(t *testing.T, s *testServer, path string, want pathWant) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.ts.URL, "http")+path, nil)
	if want.chain == "" {
		if err == nil {
			c.CloseNow()
			t.Errorf("WS %s: connected, want a 404", path)
			return
		}
		if resp == nil {
			t.Fatalf("WS %s: %v, want a 404 answer", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		checkNotFound(t, "WS "+path, resp, body, want.paths)
		return
	}
	if err != nil {
		t.Errorf("WS %s: %v, want chain %s", path, err, want.chain)
		return
	}
	defer c.CloseNow()
	testkit.WSWrite(t, c, callOf("test_chain"))
	if got, wantMsg := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":1,"result":"`+want.chain+`"}`; got != wantMsg {
		t.Errorf("WS %s: %s, want %s", path, got, wantMsg)
	}
}

// TestChainPaths: the paths a first user tries. With one chain, / serves
// it (every tool's default URL is http://127.0.0.1:8545); a trailing slash
// and a wrong case reach the chain; any other path gets HTTP 404 with a
// JSON-RPC error that lists the chain paths. The same over WebSocket.
func TestChainPaths(t *testing.T) {
	one := pathServer(t, Options{}, "test")
	two := pathServer(t, Options{}, "test", "other-chain")
	both := []string{"/other-chain", "/test"}
	keyed := pathServer(t, Options{Gate: pathKeyGate{}}, "test", "other-chain")
	tests := []struct {
		name string
		s    *testServer
		path string
		want pathWant
	}{
		{name: "one chain: root", s: one, path: "/", want: pathWant{chain: "test"}},
		{name: "one chain: its path", s: one, path: "/test", want: pathWant{chain: "test"}},
		{name: "one chain: trailing slash", s: one, path: "/test/", want: pathWant{chain: "test"}},
		{name: "one chain: wrong case", s: one, path: "/TEST", want: pathWant{chain: "test"}},
		{name: "one chain: wrong case and slash", s: one, path: "/Test/", want: pathWant{chain: "test"}},
		{name: "one chain: unknown", s: one, path: "/mainnet", want: pathWant{paths: []string{"/test"}}},
		{name: "one chain: nested", s: one, path: "/test/extra", want: pathWant{paths: []string{"/test"}}},
		{name: "two chains: root", s: two, path: "/", want: pathWant{paths: both}},
		{name: "two chains: each", s: two, path: "/other-chain", want: pathWant{chain: "other-chain"}},
		{name: "two chains: trailing slash", s: two, path: "/other-chain/", want: pathWant{chain: "other-chain"}},
		{name: "two chains: wrong case", s: two, path: "/Other-Chain", want: pathWant{chain: "other-chain"}},
		{name: "two chains: unknown", s: two, path: "/nochain", want: pathWant{paths: both}},
		{name: "two chains: two slashes", s: two, path: "/test//", want: pathWant{paths: both}},
		{name: "keys: key in path, trailing slash", s: keyed, path: "/test/" + aliceSecret + "/", want: pathWant{chain: "test"}},
		{name: "keys: wrong case, key in path", s: keyed, path: "/TEST/" + aliceSecret, want: pathWant{chain: "test"}},
		{name: "keys: unknown chain", s: keyed, path: "/nochain/" + aliceSecret, want: pathWant{paths: both}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkHTTPPath(t, tt.s, tt.path, tt.want)
			checkWSPath(t, tt.s, tt.path, tt.want)
		})
	}
}

// TestAbsoluteFormRoot: a request line in absolute form without a path
// ("POST http://host:8545 HTTP/1.1", which some proxies and clients send)
// has an empty path: it is the root, and reaches the only chain.
func TestAbsoluteFormRoot(t *testing.T) {
	s := pathServer(t, Options{}, "test")
	addr := strings.TrimPrefix(s.ts.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		s.ts.URL, addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("absolute-form request without a path = %d %s, want 200 from the only chain", resp.StatusCode, b)
	}
}
