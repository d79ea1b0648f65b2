package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/jrpc"
)

// serveWS serves c's subscriptions at /test over a real jrpc server.
func serveWS(t *testing.T, c *Center) string { return serveWSB(t, c) }

func serveWSB(t testing.TB, c *Center) string {
	t.Helper()
	s := jrpc.NewServer(jrpc.Options{})
	s.Handle("test", jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		switch req.Method {
		case "eth_subscribe":
			return c.Subscribe(ctx, req.Params)
		case "eth_unsubscribe":
			return c.Unsubscribe(ctx, req.Params)
		}
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "no"}
	}))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/test"
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func readMsg(t *testing.T, ws *websocket.Conn) map[string]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}

func TestOverWebSocketTheReplyComesFirst(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	c := startCenter(t, f, Options{})
	ws := dial(t, serveWS(t, c))
	ctx := context.Background()
	// syncing queues its notification at once: it must still follow the
	// reply that names its id.
	for i := range 20 {
		req := `{"jsonrpc":"2.0","id":` + string(rune('1'+i%9)) + `,"method":"eth_subscribe","params":["syncing"]}`
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		reply := readMsg(t, ws)
		var id string
		if err := json.Unmarshal(reply["result"], &id); err != nil {
			t.Fatalf("first message is not the reply: %v", reply)
		}
		note := readMsg(t, ws)
		var p struct {
			Subscription string
			Result       json.RawMessage
		}
		if err := json.Unmarshal(note["params"], &p); err != nil || string(note["method"]) != `"eth_subscription"` ||
			p.Subscription != id || string(p.Result) != "false" {
			t.Fatalf("notification %v", note)
		}
		res, err := c.Unsubscribe(ctx, json.RawMessage(`["`+id+`"]`))
		if err == nil {
			t.Fatalf("unsubscribed from outside the connection: %s", res)
		}
		req = `{"jsonrpc":"2.0","id":99,"method":"eth_unsubscribe","params":["` + id + `"]}`
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		if r := readMsg(t, ws); string(r["result"]) != "true" {
			t.Fatalf("unsubscribe: %v", r)
		}
	}
}

func TestSlowWebSocketClientGetsACloseCode(t *testing.T) {
	f := newFeed(t, 64)
	f.extend("a", 1, 1, "a")
	// A queue too small for one head overflows with the first, however fast
	// the client reads: the test waits on no race between the writer and
	// the dispatcher.
	c := startCenter(t, f, Options{QueueBytes: 64})
	ws := dial(t, serveWS(t, c))
	ctx := context.Background()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)); err != nil {
		t.Fatal(err)
	}
	readMsg(t, ws)
	waitView(t, c, 1)
	f.extend("a", 2, 2, "a")
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_, _, err := ws.Read(rctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != closeSlow || !strings.Contains(ce.Reason, "too slow") {
			t.Fatalf("connection ended with %v, want close %d", err, closeSlow)
		}
		return
	}
}
