package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/natstest"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

const testChain = "eth"

// requestTimeout bounds one request in these tests.
const requestTimeout = 10 * time.Second

// handler answers a few methods, counts the calls it serves, and blocks a
// call to test_block until release is closed.
type handler struct {
	calls   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newHandler() *handler {
	return &handler{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *handler) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	h.calls.Add(1)
	switch req.Method {
	case "eth_chainId":
		return json.RawMessage(`"0x1"`), nil
	case "test_echo":
		return req.Params, nil
	case "test_fail":
		return nil, &jrpc.Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x08c379a0"`)}
	case "test_block":
		h.entered <- struct{}{}
		select {
		case <-h.release:
			return json.RawMessage(`"released"`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method " + req.Method + " does not exist/is not available"}
}

// replica is one venn process's share of a test: its jrpc server (served
// over HTTP too), its connection and its request/reply service.
type replica struct {
	srv  *jrpc.Server
	http *httptest.Server
	conn *Conn
	rpc  *RPC
	reg  *prometheus.Registry
}

func startReplica(t *testing.T, ns *natstest.Server, h jrpc.Handler, lim jrpc.Limits, cfg Config) *replica {
	t.Helper()
	reg := prometheus.NewRegistry()
	srv := jrpc.NewServer(jrpc.Options{Limits: lim, Registerer: reg})
	srv.Handle(testChain, h)
	if cfg.URL == "" {
		cfg.URL = ns.URL()
	}
	cfg = cfg.WithDefaults()
	cfg.ReconnectWait, cfg.ReconnectJitter = 50*time.Millisecond, 10*time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	conn := New(cfg, "venn test", nil, reg)
	if err := conn.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rpc := NewRPC(conn, srv, nil, reg)
	r := &replica{srv: srv, http: httptest.NewServer(srv.Handler()), conn: conn, rpc: rpc, reg: reg}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rpc.Stop(ctx); err != nil {
			t.Errorf("rpc stop: %v", err)
		}
		if err := conn.Stop(ctx); err != nil {
			t.Errorf("conn stop: %v", err)
		}
		r.http.Close()
		_ = srv.Shutdown(ctx)
	})
	if err := rpc.Serve(testChain); err != nil {
		t.Fatal(err)
	}
	// The server has the subscription once a flush after it returns.
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *replica) post(t *testing.T, body []byte) []byte {
	t.Helper()
	res, err := http.Post(r.http.URL+"/"+testChain, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *replica) outcome(o string) float64 {
	return testutil.ToFloat64(r.rpc.metrics.messages.WithLabelValues(testChain, o))
}

func request(t *testing.T, nc *natsgo.Conn, m *natsgo.Msg) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	res, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("request %s: %v", m.Data, err)
	}
	return res.Data
}

func rpcMsg(body string) *natsgo.Msg {
	return &natsgo.Msg{Subject: "venn." + testChain + ".rpc", Data: []byte(body)}
}

// A call, a batch of every kind of item and a message of notifications
// only are answered over NATS with exactly the bytes HTTP answers.
func TestRequestAnsweredAsOverHTTP(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	r := startReplica(t, ns, newHandler(), jrpc.Limits{}, Config{})
	nc := ns.Connect()
	tests := []struct {
		name string
		give string
	}{
		{name: "call", give: `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`},
		{name: "string id and params kept as sent", give: `{"jsonrpc":"2.0","id":"a-1","method":"test_echo","params":[ {"x" : 1.50} ]}`},
		{name: "mixed batch", give: `[
			{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},
			{"jsonrpc":"2.0","method":"test_echo","params":[1]},
			{"jsonrpc":"2.0","id":2,"method":"test_fail"},
			{"jsonrpc":"2.0","id":3,"method":"nope"},
			{"foo":"bar"},
			1,
			{"jsonrpc":"2.0","id":null,"method":"test_echo","params":["n"]}
		]`},
		{name: "empty batch", give: `[]`},
		{name: "invalid request", give: `{"jsonrpc":"1.0","id":1,"method":"eth_chainId"}`},
		{name: "not JSON", give: `{"jsonrpc":"2.0","id":1,`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := request(t, nc, rpcMsg(tt.give))
			want := r.post(t, []byte(tt.give))
			if !bytes.Equal(got, want) {
				t.Fatalf("over NATS:\n%s\nover HTTP:\n%s", got, want)
			}
		})
	}
	// Notifications only: HTTP answers 200 with no body; NATS with an
	// empty reply, so that the requester does not wait for a timeout.
	if got := request(t, nc, rpcMsg(`[{"jsonrpc":"2.0","method":"test_echo","params":[1]}]`)); len(got) != 0 {
		t.Fatalf("notifications only answered %q, want an empty reply", got)
	}
}

// Bad input is answered with a JSON-RPC error where there is someone to
// answer, counted, and never holds up the subscription: the next request
// is answered.
func TestBadInputAnsweredAndCounted(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	r := startReplica(t, ns, newHandler(), jrpc.Limits{MaxBodyBytes: 1024}, Config{})
	nc := ns.Connect()

	big := `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":["` + strings.Repeat("x", 2000) + `"]}`
	tests := []struct {
		name    string
		give    string
		code    int
		message string
		outcome string
	}{
		{name: "over max_body_bytes", give: big, code: jrpc.CodeLimitExceeded, message: "max_body_bytes (1024 bytes)", outcome: outcomeOverLimit},
		{name: "not JSON", give: `{"id":1,"method":`, code: jrpc.CodeParseError, message: "parse error", outcome: outcomeParseError},
		{name: "not a request", give: `"hello"`, code: jrpc.CodeInvalidRequest, message: "invalid request", outcome: outcomeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := r.outcome(tt.outcome)
			got := request(t, nc, rpcMsg(tt.give))
			var res struct {
				ID    json.RawMessage `json:"id"`
				Error *jrpc.Error     `json:"error"`
			}
			if err := json.Unmarshal(got, &res); err != nil || res.Error == nil {
				t.Fatalf("answer %s is not a JSON-RPC error (%v)", got, err)
			}
			if res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.message) || string(res.ID) != "null" {
				t.Fatalf("answer %s, want code %d with %q and id null", got, tt.code, tt.message)
			}
			// A served message is counted after its reply is published,
			// which the requester may have before that.
			testkit.Poll(5*time.Second, func() bool { return r.outcome(tt.outcome) > before })
			if d := r.outcome(tt.outcome) - before; d != 1 {
				t.Fatalf("%s counted %v times, want 1", tt.outcome, d)
			}
		})
	}

	// A message without a reply subject has no one to answer: dropped,
	// counted. The subscription serves messages in order, so once the
	// request behind it is answered, it has been counted.
	if err := nc.Publish("venn."+testChain+".rpc", []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)); err != nil {
		t.Fatal(err)
	}
	if got := request(t, nc, rpcMsg(`{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`)); string(got) != `{"jsonrpc":"2.0","id":2,"result":"0x1"}` {
		t.Fatalf("request after a message without reply: %s", got)
	}
	if n := r.outcome(outcomeNoReply); n != 1 {
		t.Fatalf("no_reply counted %v times, want 1", n)
	}
}

// Two replicas in the queue group: each request is served once, and both
// serve some.
func TestQueueGroupServesEachRequestOnce(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	h1, h2 := newHandler(), newHandler()
	startReplica(t, ns, h1, jrpc.Limits{}, Config{})
	startReplica(t, ns, h2, jrpc.Limits{}, Config{})
	nc := ns.Connect()
	const n = 64
	for i := range n {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"test_echo","params":[%d]}`, i, i)
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":[%d]}`, i, i)
		if got := request(t, nc, rpcMsg(body)); string(got) != want {
			t.Fatalf("request %d answered %s, want %s", i, got, want)
		}
	}
	c1, c2 := h1.calls.Load(), h2.calls.Load()
	if c1+c2 != n {
		t.Fatalf("replicas served %d + %d calls for %d requests", c1, c2, n)
	}
	if c1 == 0 || c2 == 0 {
		t.Fatalf("one replica served every request (%d, %d): no queue group spread", c1, c2)
	}
}

// With max_in_flight requests being served, the next is answered at once
// with CodeLimitExceeded, and the one in flight still gets its answer.
func TestBusyAnsweredAtOnce(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	h := newHandler()
	r := startReplica(t, ns, h, jrpc.Limits{}, Config{RPC: RPCConfig{MaxInFlight: 1}})
	nc := ns.Connect()

	slow := make(chan []byte, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		m, err := nc.RequestMsgWithContext(ctx, rpcMsg(`{"jsonrpc":"2.0","id":1,"method":"test_block"}`))
		if err != nil {
			slow <- []byte(err.Error())
			return
		}
		slow <- m.Data
	}()
	<-h.entered
	got := request(t, nc, rpcMsg(`{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`))
	if !bytes.Contains(got, []byte(`"code":-32052`)) || !bytes.Contains(got, []byte("nats.rpc.max_in_flight (1)")) {
		t.Fatalf("request past max_in_flight answered %s", got)
	}
	close(h.release)
	if got := <-slow; string(got) != `{"jsonrpc":"2.0","id":1,"result":"released"}` {
		t.Fatalf("the request in flight answered %s", got)
	}
	if n := r.outcome(outcomeBusy); n != 1 {
		t.Fatalf("busy counted %v times, want 1", n)
	}
}

// Stopping drains: the request being served is answered before Stop
// returns, and later requests go to no one (no responders), not to a
// half-stopped replica.
func TestStopFinishesRequestsInFlight(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	h := newHandler()
	r := startReplica(t, ns, h, jrpc.Limits{}, Config{})
	nc := ns.Connect()

	slow := make(chan []byte, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		m, err := nc.RequestMsgWithContext(ctx, rpcMsg(`{"jsonrpc":"2.0","id":1,"method":"test_block"}`))
		if err != nil {
			slow <- []byte(err.Error())
			return
		}
		slow <- m.Data
	}()
	<-h.entered
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		stopped <- r.rpc.Stop(ctx)
	}()
	// Stop waits for the call: the subscription is gone, the call not.
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	for r.rpc.subCount() != 0 {
		select {
		case <-ctx.Done():
			t.Fatal("Stop did not drop the subscription")
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a request in flight", err)
	default:
	}
	close(h.release)
	if got := <-slow; string(got) != `{"jsonrpc":"2.0","id":1,"result":"released"}` {
		t.Fatalf("the request in flight answered %s", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := nc.RequestMsg(rpcMsg(`{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`), requestTimeout); err != natsgo.ErrNoResponders {
		t.Fatalf("request after Stop: %v, want no responders", err)
	}
}

// A NATS crash and restart: the connection reconnects by itself, its
// subscription comes back, and requests are answered again; HTTP answers
// all along.
func TestReconnectsAfterNATSRestart(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	r := startReplica(t, ns, newHandler(), jrpc.Limits{}, Config{})
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	want := `{"jsonrpc":"2.0","id":1,"result":"0x1"}`

	ns.Kill()
	if got := string(r.post(t, []byte(call))); got != want {
		t.Fatalf("HTTP with NATS down answered %s", got)
	}
	if st := r.conn.Status(); st.State != "reconnecting" || st.Server != "" {
		t.Fatalf("status with NATS down: %+v", st)
	}
	ns.Restart()
	nc := ns.Connect()
	// The replica reconnects on its own backoff: requests find no
	// responder until its subscription is back.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		m, err := nc.RequestMsgWithContext(ctx, rpcMsg(call))
		if err == nil {
			if string(m.Data) != want {
				t.Fatalf("after the restart: %s", m.Data)
			}
			break
		}
		if err != natsgo.ErrNoResponders {
			t.Fatalf("request after the restart: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the replica did not serve again after NATS restarted")
		case <-time.After(20 * time.Millisecond):
		}
	}
	st := r.conn.Status()
	if st.State != "connected" || st.Reconnects < 1 || st.Server != ns.URL() {
		t.Fatalf("status after the restart: %+v", st)
	}
	if v := testutil.ToFloat64(r.conn.metrics.reconnects); v < 1 {
		t.Fatalf("venn_nats_reconnects_total = %v", v)
	}
}

// subCount is the subscriptions held, for tests.
func (r *RPC) subCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs)
}

// A partition (the network stops passing bytes, nothing is closed): the
// replica notices by its pings, reconnects once the network is back, and
// serves again; HTTP answers all along.
func TestReconnectsAfterPartition(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	net := pgtest.NewProxy(t, ns.URL()) // venn reaches NATS through it
	r := startReplica(t, ns, newHandler(), jrpc.Limits{},
		Config{URL: net.URL(), PingInterval: 100 * time.Millisecond, ConnectTimeout: 300 * time.Millisecond})
	nc := ns.Connect()
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	want := `{"jsonrpc":"2.0","id":1,"result":"0x1"}`
	if got := request(t, nc, rpcMsg(call)); string(got) != want {
		t.Fatalf("before the partition: %s", got)
	}

	net.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for r.conn.Status().State != "reconnecting" {
		select {
		case <-ctx.Done():
			t.Fatalf("the partition was not noticed: %+v", r.conn.Status())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := string(r.post(t, []byte(call))); got != want {
		t.Fatalf("HTTP during the partition: %s", got)
	}
	net.Resume()
	for {
		m, err := nc.RequestMsg(rpcMsg(call), 500*time.Millisecond)
		if err == nil {
			if string(m.Data) != want {
				t.Fatalf("after the partition: %s", m.Data)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not served again after the partition: %v (%+v)", err, r.conn.Status())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if st := r.conn.Status(); st.State != "connected" || st.Reconnects < 1 {
		t.Fatalf("status after the partition: %+v", st)
	}
}
