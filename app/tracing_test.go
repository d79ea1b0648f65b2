package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// The client's trace contexts: venn's spans must join them.
const (
	clientTraceHTTP = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanHTTP  = "00f067aa0ba902b7"
	clientTraceWS   = "0af7651916cd43dd8448eb211c80319c"
	clientSpanWS    = "b7ad6b7169203331"
)

// headerLog serves a fake node and keeps the traceparent of every request
// that carried one.
type headerLog struct {
	mu     sync.Mutex
	parent []string
}

func (h *headerLog) serve(t *testing.T, node *fakenode.Node) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("Traceparent"); tp != "" {
			h.mu.Lock()
			h.parent = append(h.parent, tp)
			h.mu.Unlock()
		}
		node.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (h *headerLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.parent...)
}

// TestTracingFailover runs venn with tracing on, its spans going to an
// in-memory exporter through the real provider (sampler, batcher, flush on
// stop), in front of two fake nodes: the primary fails the first
// eth_getBalance, so the call fails over to the secondary. The call span
// joins the client's traceparent, the two sends are its children with
// what each reply meant, the secondary got the second send's traceparent,
// and no URL or key appears anywhere.
func TestTracingFailover(t *testing.T) {
	a := fakenode.New(fakenode.Options{ChainID: 1337, Name: "a"})
	b := fakenode.New(fakenode.Options{ChainID: 1337, Name: "b"})
	var failed atomic.Bool
	a.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" && failed.CompareAndSwap(false, true) {
			return nil, &jrpc.Error{Code: jrpc.CodeInternal, Message: "internal error"}, true
		}
		return nil, nil, false
	})
	var hdrA, hdrB headerLog
	urlA, urlB := hdrA.serve(t, a).URL+"/SECRETKEY", hdrB.serve(t, b).URL+"/SECRETKEY"
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
tracing: {enabled: true, sampling_ratio: 1, propagate_upstream: true}
chains:
  - name: test
    chain_id: 1337
    block_time: 1h
    integrity: {stalker: false}
    remotes:
      - {name: a, url: "`+urlA+`"}
      - {name: b, url: "`+urlB+`", tier: secondary}
`)
	exp := tracetest.NewInMemoryExporter()
	var (
		s   *servers
		reg *prometheus.Registry
	)
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(&testkit.Buffer{}), TraceExporter(keepSpans{exp}), fx.Populate(&s, &reg))
	app.RequireStart()
	rpc := "http://" + s.rpc.bound.String() + "/test"
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	testkit.WaitFor(t, 10*time.Second, "both remotes in rotation", func() bool {
		return healthyRemotes(t, reg) == 2
	})

	// Over HTTP, in the client's trace; then a batch of two.
	req, _ := http.NewRequest(http.MethodPost, rpc, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+clientTraceHTTP+"-"+clientSpanHTTP+"-01")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var r wireResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Error != nil {
		t.Fatalf("eth_getBalance: %+v, %v", r.Error, err)
	}
	resp.Body.Close()
	if !failed.Load() {
		t.Fatal("remote a never failed: the call did not go to it first")
	}
	resp, err = client.Post(rpc, "application/json",
		strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// Over WebSocket, in the trace of the upgrade's traceparent.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Traceparent", "00-"+clientTraceWS+"-"+clientSpanWS+"-01")
	ws, _, err := websocket.Dial(ctx, "ws://"+s.rpc.bound.String()+"/test", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WSWrite(t, ws, `{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}`)
	testkit.WSRead(t, ws)
	ws.Close(websocket.StatusNormalClosure, "")

	if n, err := testutil.GatherAndCount(reg, "venn_trace_spans_dropped_total"); err != nil || n != 1 {
		t.Errorf("venn_trace_spans_dropped_total: %d series (%v), want 1", n, err)
	}
	app.RequireStop() // flushes the batcher
	spans := exp.GetSpans()
	checkNoSecrets(t, spans)

	call := findSpan(t, spans, func(sp tracetest.SpanStub) bool {
		return sp.SpanKind == trace.SpanKindServer && sp.SpanContext.TraceID().String() == clientTraceHTTP
	})
	if got := call.Parent.SpanID().String(); got != clientSpanHTTP || !call.Parent.IsRemote() {
		t.Errorf("call span's parent = %s (remote %v), want the client's %s", got, call.Parent.IsRemote(), clientSpanHTTP)
	}
	wantAttrs(t, "call span", call, map[string]string{"rpc.method": "eth_getBalance", "venn.chain": "test",
		"venn.source": "remotes", "venn.outcome": "ok", // the source from the call's note
		"venn.remote": "", "venn.attempts": "", "venn.transport": ""}) // on the sends, or nowhere
	if call.Name != "eth_getBalance" {
		t.Errorf("call span named %q", call.Name)
	}
	if attr(call, "venn.request_id") == "" {
		t.Error("call span has no venn.request_id: the answer's X-Request-Id")
	}

	var sends []tracetest.SpanStub
	for _, sp := range spans {
		if sp.SpanKind == trace.SpanKindClient && sp.Parent.SpanID() == call.SpanContext.SpanID() {
			sends = append(sends, sp)
		}
	}
	if len(sends) != 2 {
		t.Fatalf("%d upstream sends under the call span, want 2: %v", len(sends), sends)
	}
	first, second := sends[0], sends[1]
	if attr(first, "venn.attempt") != "1" {
		first, second = second, first
	}
	wantAttrs(t, "first send", first, map[string]string{"venn.remote": "a", "venn.attempt": "1",
		"venn.attempt.role": "", "venn.attempt.result": "fault", "venn.error.class": "retry",
		"venn.error.reason": "server_error", "rpc.jsonrpc.error_code": "-32603", "http.response.status_code": "200"})
	wantAttrs(t, "second send", second, map[string]string{"venn.remote": "b", "venn.attempt": "2",
		"venn.attempt.role": "", "venn.attempt.result": "answer", "http.response.status_code": "200"})

	// propagate_upstream: each remote got its own send's span as parent.
	wantParent(t, "remote a", hdrA.all(), first)
	wantParent(t, "remote b", hdrB.all(), second)

	for i := range 2 {
		findSpan(t, spans, func(sp tracetest.SpanStub) bool {
			return sp.Name == "eth_chainId" && attr(sp, "venn.batch.index") == strconv.Itoa(i) &&
				attr(sp, "venn.source") == "local"
		})
	}
	// The leader's block fetches: traces of their own, sends under them;
	// one that succeeded names its block (on a loaded machine the fetches
	// the test sees may all have failed: those say only that).
	sendsUnder := func(parent tracetest.SpanStub) bool {
		for _, sp := range spans {
			if sp.SpanKind == trace.SpanKindClient && sp.Parent.SpanID() == parent.SpanContext.SpanID() {
				return true
			}
		}
		return false
	}
	findSpan(t, spans, func(sp tracetest.SpanStub) bool {
		return sp.Name == "venn.stalker.fetch" && !sp.Parent.IsValid() && sendsUnder(sp)
	})
	for _, sp := range spans {
		if sp.Name == "venn.stalker.fetch" && sp.Status.Code != codes.Error && attr(sp, "venn.block") == "" {
			t.Errorf("a block fetch that succeeded does not name its block: %v", sp.Attributes)
		}
	}

	wsCall := findSpan(t, spans, func(sp tracetest.SpanStub) bool {
		return sp.SpanKind == trace.SpanKindServer && sp.SpanContext.TraceID().String() == clientTraceWS
	})
	wantAttrs(t, "WebSocket call span", wsCall, map[string]string{"rpc.method": "eth_chainId"})
	if got := wsCall.Parent.SpanID().String(); got != clientSpanWS {
		t.Errorf("WebSocket call span's parent = %s, want %s", got, clientSpanWS)
	}
}

// keepSpans keeps the exported spans past the provider's shutdown, which
// the in-memory exporter resets on.
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

// healthyRemotes counts the remotes venn_remote_healthy says are healthy.
func healthyRemotes(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "venn_remote_healthy" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				n++
			}
		}
	}
	return n
}

func findSpan(t *testing.T, spans tracetest.SpanStubs, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	for _, sp := range spans {
		if match(sp) {
			return sp
		}
	}
	t.Fatalf("no such span among %d: %v", len(spans), spanNames(spans))
	return tracetest.SpanStub{}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name+"/"+sp.SpanKind.String())
	}
	return out
}

// attr is the span's attribute key as text; "" when it has none.
func attr(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func wantAttrs(t *testing.T, what string, sp tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(sp, k); got != v {
			t.Errorf("%s: %s = %q, want %q (all: %v)", what, k, got, v, sp.Attributes)
		}
	}
}

// wantParent checks that one of a remote's traceparents names the send's
// span in the client's trace.
func wantParent(t *testing.T, what string, got []string, send tracetest.SpanStub) {
	t.Helper()
	want := "00-" + clientTraceHTTP + "-" + send.SpanContext.SpanID().String() + "-01"
	if !slices.Contains(got, want) {
		t.Errorf("%s got traceparents %v, want %s among them", what, got, want)
	}
}

// checkNoSecrets fails on a span, event or resource attribute that holds a
// URL, an address, the remotes' key or a call's params.
func checkNoSecrets(t *testing.T, spans tracetest.SpanStubs) {
	t.Helper()
	for _, sp := range spans {
		kvs := append(append([]attribute.KeyValue(nil), sp.Attributes...), sp.Resource.Attributes()...)
		for _, ev := range sp.Events {
			kvs = append(kvs, ev.Attributes...)
		}
		for _, kv := range kvs {
			v := kv.Value.Emit()
			for _, bad := range []string{"://", "127.0.0.1", "SECRETKEY", "00000000aa"} {
				if strings.Contains(v, bad) {
					t.Errorf("span %s: %s = %q holds %q", sp.Name, kv.Key, v, bad)
				}
			}
		}
		if strings.Contains(sp.Status.Description, "://") {
			t.Errorf("span %s: status %q holds a URL", sp.Name, sp.Status.Description)
		}
	}
}
