package fakenode

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/venn-gateway/venn/jrpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait of a test.
const testTimeout = 10 * time.Second

// httpClient returns a client whose idle connections close with the test.
func httpClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: testTimeout}
}

// post sends body and returns the status and the body of the answer.
func post(t *testing.T, hc *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post %s: %v", body, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer to %s: %v", body, err)
	}
	return resp.StatusCode, string(b)
}

// callRPC calls method over HTTP and decodes the answer.
func callRPC(t *testing.T, hc *http.Client, url, method string, params ...any) (json.RawMessage, *jrpc.Error) {
	t.Helper()
	if params == nil {
		params = []any{}
	}
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	status, body := post(t, hc, url, string(req))
	if status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", method, status, body)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *jrpc.Error     `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%s: decode %q: %v", method, body, err)
	}
	return resp.Result, resp.Error
}

// mustRPC is callRPC for calls that must succeed.
func mustRPC(t *testing.T, hc *http.Client, url, method string, params ...any) json.RawMessage {
	t.Helper()
	res, rerr := callRPC(t, hc, url, method, params...)
	if rerr != nil {
		t.Fatalf("%s: %v", method, rerr)
	}
	return res
}

// wsClient is a bare WebSocket JSON-RPC client that shows every message,
// notifications included, in arrival order.
type wsClient struct {
	t *testing.T
	c *websocket.Conn
}

func dialWS(t *testing.T, url string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(MaxWSMessageBytes)
	t.Cleanup(func() { _ = c.CloseNow() })
	return &wsClient{t: t, c: c}
}

func (w *wsClient) send(msg string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		w.t.Fatalf("ws write: %v", err)
	}
}

func (w *wsClient) read() string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, b, err := w.c.Read(ctx)
	if err != nil {
		w.t.Fatalf("ws read: %v", err)
	}
	return string(b)
}

// wsNote is an eth_subscription notification.
type wsNote struct {
	Method string `json:"method"`
	Params struct {
		Subscription string          `json:"subscription"`
		Result       json.RawMessage `json:"result"`
	} `json:"params"`
}

func (w *wsClient) readNote() wsNote {
	w.t.Helper()
	msg := w.read()
	var n wsNote
	if err := json.Unmarshal([]byte(msg), &n); err != nil || n.Method != "eth_subscription" {
		w.t.Fatalf("want a notification, got %s", msg)
	}
	return n
}

// subscribe subscribes and returns the subscription id.
func (w *wsClient) subscribe(params string) string {
	w.t.Helper()
	w.send(`{"jsonrpc":"2.0","id":"sub","method":"eth_subscribe","params":` + params + `}`)
	msg := w.read()
	var resp struct {
		Result string      `json:"result"`
		Error  *jrpc.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(msg), &resp); err != nil || resp.Error != nil || resp.Result == "" {
		w.t.Fatalf("subscribe %s: %s", params, msg)
	}
	return resp.Result
}

// hexNum decodes a quoted quantity.
func hexNum(t *testing.T, raw json.RawMessage) uint64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("quantity %s: %v", raw, err)
	}
	v, ok := fastQuantity([]byte(`"` + s + `"`))
	if !ok {
		t.Fatalf("bad quantity %s", raw)
	}
	return v
}
