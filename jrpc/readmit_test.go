package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/testkit"
)

// keyGate admits the keys (header X-Key or the path) in its current set,
// each allowed the methods listed for it; set replaces the set, as a
// reload replaces the edge. hold, when set, stops the next Admit until it
// is closed, after it has decided.
type keyGate struct {
	keys  atomic.Pointer[map[string][]string]
	names atomic.Pointer[map[string]string] // a key's name, when not the key
	mu    sync.Mutex
	hold  chan struct{}
	in    chan struct{} // signalled when a held Admit has begun
}

func newKeyGate(keys map[string][]string) *keyGate {
	g := &keyGate{in: make(chan struct{}, 1)}
	g.set(keys)
	g.names.Store(&map[string]string{})
	return g
}

func (g *keyGate) set(keys map[string][]string) { g.keys.Store(&keys) }

func (g *keyGate) KeysInPath() bool { return true }

func (g *keyGate) Admit(r *http.Request, a Admission) (Caller, *Refusal) {
	key := a.PathKey
	if key == "" {
		key = r.Header.Get("X-Key")
	}
	methods, ok := (*g.keys.Load())[key]
	g.mu.Lock()
	hold := g.hold
	g.hold = nil
	g.mu.Unlock()
	if hold != nil { // decided: the answer reaches the server later
		g.in <- struct{}{}
		<-hold
	}
	if !ok {
		return nil, &Refusal{Status: http.StatusUnauthorized, Err: &Error{Code: CodeUnauthorized, Message: "unauthorized: invalid API key"}}
	}
	name := key
	if n, ok := (*g.names.Load())[key]; ok {
		name = n
	}
	return keyCaller{name: name, methods: methods}, nil
}

type keyCaller struct {
	name    string
	methods []string
}

func (c keyCaller) Key() string                        { return c.name }
func (c keyCaller) ClientIP() netip.Addr               { return netip.Addr{} }
func (c keyCaller) Take(context.Context, int) *Refusal { return nil }

func (c keyCaller) Check(method string, _ json.RawMessage) *Error {
	for _, m := range c.methods {
		if m == method {
			return nil
		}
	}
	return &Error{Code: CodeMethodNotFound, Message: "the method " + method + " does not exist/is not available"}
}

func dialKey(t *testing.T, url, key string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var opts *websocket.DialOptions
	if key != "" {
		opts = &websocket.DialOptions{HTTPHeader: http.Header{"X-Key": {key}}}
	}
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// wantClosed reads c until it ends and wants close 1008 with a reason
// naming the refusal.
func wantClosed(t *testing.T, c *websocket.Conn, who string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation ||
		ce.Reason != "configuration reloaded: unauthorized: invalid API key" {
		t.Errorf("%s: read after Readmit = %v, want close 1008 with the refusal", who, err)
	}
}

// After Readmit, a connection whose key the gate no longer admits is
// closed with a reason, by header or by path; one still admitted goes by
// its new grants at once.
func TestReadmit(t *testing.T) {
	g := newKeyGate(map[string][]string{"alice": {"test_echo"}, "bob": {"test_echo", "get_data"}})
	s := newTestServer(t, Options{Gate: g}, echoHandler())
	alice := dialKey(t, s.wsURL(), "alice")
	alicePath := dialKey(t, s.wsURL()+"/alice", "")
	bob := dialKey(t, s.wsURL(), "bob")
	testkit.WSWrite(t, bob, `{"jsonrpc":"2.0","id":1,"method":"get_data","params":[]}`)
	if got := testkit.WSRead(t, bob); !strings.Contains(got, `"result"`) {
		t.Fatalf("bob's get_data before: %s", got)
	}
	for _, c := range []*websocket.Conn{alice, alicePath} {
		testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]}`)
		if got := testkit.WSRead(t, c); !strings.Contains(got, `"result":[1]`) {
			t.Fatalf("alice before: %s", got)
		}
	}

	g.set(map[string][]string{"bob": {"test_echo"}}) // alice revoked, bob loses get_data
	if n := s.Readmit(); n != 2 {
		t.Errorf("Readmit closed %d connections, want 2", n)
	}
	wantClosed(t, alice, "alice's connection")
	wantClosed(t, alicePath, "alice's connection by path")
	testkit.WSWrite(t, bob, `{"jsonrpc":"2.0","id":2,"method":"get_data","params":[]}`)
	if got := testkit.WSRead(t, bob); !strings.Contains(got, `"code":-32601`) {
		t.Errorf("bob's get_data after his grants changed: %s", got)
	}
	testkit.WSWrite(t, bob, `{"jsonrpc":"2.0","id":3,"method":"test_echo","params":[3]}`)
	if got := testkit.WSRead(t, bob); !strings.Contains(got, `"result":[3]`) {
		t.Errorf("bob's test_echo after: %s", got)
	}
}

// A connection admitted by the old gate and tracked only after a Readmit
// took its list admits itself again.
func TestReadmitDuringUpgrade(t *testing.T) {
	g := newKeyGate(map[string][]string{"alice": {"test_echo"}})
	s := newTestServer(t, Options{Gate: g}, echoHandler())
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	dialed := make(chan error, 1)
	var c *websocket.Conn
	go func() {
		var err error
		c, _, err = websocket.Dial(context.Background(), s.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"X-Key": {"alice"}}})
		dialed <- err
	}()
	<-g.in // admitted under the old keys, not tracked yet
	g.set(map[string][]string{})
	if n := s.Readmit(); n != 0 {
		t.Errorf("Readmit closed %d, want none tracked", n)
	}
	close(hold)
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	wantClosed(t, c, "the connection upgraded during the Readmit")
}

// A readmitted connection whose key's name changed shows its handlers
// the new name.
func TestReadmitRenamedKey(t *testing.T) {
	g := newKeyGate(map[string][]string{"bob": {"peer_key"}})
	s := newTestServer(t, Options{Gate: g}, HandlerFunc(func(ctx context.Context, _ *Request) (json.RawMessage, error) {
		p, _ := PeerFromContext(ctx)
		return json.Marshal(p.Key)
	}))
	c := dialKey(t, s.wsURL(), "bob")
	ask := func() string {
		testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"peer_key","params":[]}`)
		return testkit.WSRead(t, c)
	}
	if got := ask(); !strings.Contains(got, `"result":"bob"`) {
		t.Fatalf("before: %s", got)
	}
	g.names.Store(&map[string]string{"bob": "robert"})
	s.Readmit()
	if got := ask(); !strings.Contains(got, `"result":"robert"`) {
		t.Errorf("after the key was renamed: %s", got)
	}
}
