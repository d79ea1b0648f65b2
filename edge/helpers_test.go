package edge

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

// testChain is the chain every test server serves.
const testChain = "test"

// echoHandler answers test_echo with its params and update (a
// notification in the tests) with null; any other method does not exist.
func echoHandler() jrpc.Handler {
	return jrpc.HandlerFunc(func(_ context.Context, req *jrpc.Request) (json.RawMessage, error) {
		switch req.Method {
		case "test_echo":
			return req.Params, nil
		case "update":
			return nil, nil
		}
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "Method not found"}
	})
}

// testServer is a jrpc.Server behind an Edge behind an httptest.Server,
// all stopped at cleanup.
type testServer struct {
	*jrpc.Server
	edge *Edge
	ts   *httptest.Server
}

// newTestServer serves h as testChain behind the edge c compiles; opts'
// Logger and Registerer serve the JSON-RPC server too.
func newTestServer(t *testing.T, c Config, opts Options, h jrpc.Handler) *testServer {
	t.Helper()
	e := New(c, opts)
	s := jrpc.NewServer(jrpc.Options{Logger: opts.Logger, Registerer: opts.Registerer, Gate: e})
	s.Handle(testChain, h)
	ts := httptest.NewServer(e.Wrap(s.Handler()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
	})
	return &testServer{Server: s, edge: e, ts: ts}
}

func (s *testServer) wsURL() string {
	return "ws" + strings.TrimPrefix(s.ts.URL, "http") + "/" + testChain
}

// dial opens a WebSocket to the test chain, closed at cleanup.
func (s *testServer) dial(t *testing.T) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// counterValue is the counter name{labels} in reg; 0 when absent.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && len(m.GetLabel()) == len(labels) && hasLabels(m.GetLabel(), labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabels[L interface {
	GetName() string
	GetValue() string
}](got []L, want map[string]string) bool {
	for _, lp := range got {
		if want[lp.GetName()] != lp.GetValue() {
			return false
		}
	}
	return true
}
