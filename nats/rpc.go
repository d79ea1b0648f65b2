package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

// Transport names NATS in jrpc.Peer.Transport and the request log.
const Transport = "nats"

// maxPooledBuf keeps a rare huge answer from pinning its buffer in the
// pool.
const maxPooledBuf = 1 << 20

// Handler serves one JSON-RPC message of a chain: jrpc.Server's
// ServeInbound, the same that serves HTTP bodies.
type Handler interface {
	ServeInbound(ctx context.Context, in jrpc.Inbound, buf []byte) ([]byte, *jrpc.Error)
}

var _ Handler = (*jrpc.Server)(nil)

// RPC serves JSON-RPC over NATS request/reply: for each chain served, a
// subscription to PREFIX.CHAIN.rpc in the queue group PREFIX, so that
// NATS hands each request to one replica. A request's payload is a call
// or a batch, handled by the same jrpc handler as HTTP (limits, keys,
// rate limits, router); an API key travels in a header named as over
// HTTP. The answer is published to the request's reply subject.
//
// The subscription's goroutine only takes a slot and starts the call's:
// a slow call never holds up the requests behind it. With
// rpc.max_in_flight requests being served, a request is answered at once
// with CodeLimitExceeded. A message without a reply subject is counted
// and dropped: there is no one to answer.
type RPC struct {
	conn    *Conn
	h       Handler
	cfg     Config
	log     *slog.Logger
	metrics *rpcMetrics

	slots  chan struct{} // one per request being served
	ctx    context.Context
	cancel context.CancelFunc
	bufs   sync.Pool // *[]byte answers

	mu      sync.Mutex
	subs    map[string]*natsgo.Subscription // by chain
	closing bool                            // Stop has drained the subscriptions: no request starts
	calls   sync.WaitGroup                  // requests being served; Add under mu
}

// NewRPC returns the service on conn, serving with h. It subscribes
// nothing until Serve. reg may be nil.
func NewRPC(conn *Conn, h Handler, log *slog.Logger, reg prometheus.Registerer) *RPC {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := conn.Config()
	ctx, cancel := context.WithCancel(context.Background())
	r := &RPC{conn: conn, h: h, cfg: cfg, log: log, metrics: newRPCMetrics(reg),
		slots: make(chan struct{}, cfg.RPC.MaxInFlight), ctx: ctx, cancel: cancel,
		subs: make(map[string]*natsgo.Subscription)}
	r.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	return r
}

// Serve subscribes to chain's subject. On a connection still waiting for
// a server, the subscription is sent when it connects. Serving a chain
// served already does nothing.
func (r *RPC) Serve(chain string) error {
	nc := r.conn.NATS()
	if nc == nil {
		return errors.New("nats: rpc: connection not started")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return errors.New("nats: rpc: stopped")
	}
	if r.subs[chain] != nil {
		return nil
	}
	for _, o := range outcomes { // every series from the start, at 0
		r.metrics.messages.WithLabelValues(chain, o)
	}
	subject := r.cfg.RPCSubject(chain)
	sub, err := nc.QueueSubscribe(subject, r.cfg.QueueGroup(), func(m *natsgo.Msg) { r.receive(chain, m) })
	if err != nil {
		return fmt.Errorf("nats: subscribe %s: %w", subject, err)
	}
	r.subs[chain] = sub
	r.log.Info("serving JSON-RPC over NATS", "chain", chain, "subject", subject, "queue", r.cfg.QueueGroup())
	return nil
}

// Unserve drains chain's subscription: NATS sends its requests to the
// other replicas, and those already received are served.
func (r *RPC) Unserve(chain string) {
	r.mu.Lock()
	sub := r.subs[chain]
	delete(r.subs, chain)
	r.mu.Unlock()
	if sub != nil {
		_ = sub.Drain()
	}
}

// receive runs on the subscription's goroutine: it must not wait.
func (r *RPC) receive(chain string, m *natsgo.Msg) {
	if m.Reply == "" {
		r.metrics.messages.WithLabelValues(chain, outcomeNoReply).Inc()
		r.log.Debug("nats request without a reply subject dropped", "chain", chain, "bytes", len(m.Data))
		return
	}
	select {
	case r.slots <- struct{}{}:
	default:
		r.metrics.messages.WithLabelValues(chain, outcomeBusy).Inc()
		r.respond(chain, m, jrpc.AppendError(nil, errBusy(r.cfg.RPC.MaxInFlight)))
		return
	}
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		<-r.slots
		r.metrics.messages.WithLabelValues(chain, outcomeShuttingDown).Inc()
		r.respond(chain, m, jrpc.AppendError(nil, errShuttingDown()))
		return
	}
	r.calls.Add(1)
	r.mu.Unlock()
	r.metrics.inFlight.Inc()
	go r.serve(chain, m)
}

// serve serves one request and publishes its answer.
func (r *RPC) serve(chain string, m *natsgo.Msg) {
	defer func() {
		r.metrics.inFlight.Dec()
		<-r.slots
		r.calls.Done()
	}()
	bp := r.bufs.Get().(*[]byte)
	out, werr := r.h.ServeInbound(r.ctx, jrpc.Inbound{Chain: chain, Transport: Transport,
		Header: httpHeader(m.Header), Body: m.Data}, (*bp)[:0])
	outcome := outcomeOf(werr)
	if werr != nil {
		r.log.Debug("nats request refused", "chain", chain, "code", werr.Code, "err", werr.Message)
	}
	if !r.respond(chain, m, out) {
		outcome = outcomeReplyFailed
	}
	r.metrics.messages.WithLabelValues(chain, outcome).Inc()
	if cap(out) <= maxPooledBuf {
		*bp = out[:0]
		r.bufs.Put(bp)
	}
}

// respond publishes out to m's reply subject (nats.go copies it before
// returning). An empty out (only notifications) is still published, so
// that the requester is not left to time out.
func (r *RPC) respond(chain string, m *natsgo.Msg, out []byte) bool {
	if err := m.Respond(out); err != nil {
		r.log.Debug("nats reply failed", "chain", chain, "err", err)
		return false
	}
	return true
}

// Stop drains every subscription (NATS sends new requests to the other
// replicas), lets the requests received finish and their answers go out,
// then returns. When ctx ends first, the calls still running are
// cancelled and Stop returns ctx's error.
func (r *RPC) Stop(ctx context.Context) error {
	r.mu.Lock()
	subs := make([]*natsgo.Subscription, 0, len(r.subs))
	for _, s := range r.subs {
		subs = append(subs, s)
	}
	clear(r.subs)
	r.mu.Unlock()
	var err error
	connected := r.conn.Connected()
	for _, s := range subs {
		if !connected {
			// Nothing to drain: no message comes on a connection that is
			// down, and nats.go's drain would wait for a flush.
			_ = s.Unsubscribe()
			continue
		}
		closed := s.StatusChanged(natsgo.SubscriptionClosed)
		if derr := s.Drain(); derr != nil {
			_ = s.Unsubscribe() // the connection is closed or closing
			continue
		}
		select {
		case <-closed:
		case <-ctx.Done():
			_ = s.Unsubscribe()
			err = fmt.Errorf("nats: rpc: drain %s: %w", s.Subject, ctx.Err())
		}
	}
	r.mu.Lock()
	r.closing = true // no Add after this: Wait is safe
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		select {
		case <-done: // both ready: the calls did finish
			r.cancel()
			return err
		default:
		}
		r.cancel()
		if err == nil {
			err = fmt.Errorf("nats: rpc: wait for requests in flight: %w", ctx.Err())
		}
	}
	r.cancel()
	return err
}

// httpHeader is a NATS message's headers as an HTTP request's: NATS keys
// are case-sensitive, HTTP's canonical.
func httpHeader(h natsgo.Header) http.Header {
	if len(h) == 0 {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out.Add(k, v)
		}
	}
	return out
}

// outcomeOf labels a message's whole-message error.
func outcomeOf(e *jrpc.Error) string {
	if e == nil {
		return outcomeAnswered
	}
	switch e.Code {
	case jrpc.CodeParseError:
		return outcomeParseError
	case jrpc.CodeInvalidRequest:
		return outcomeInvalid
	case jrpc.CodeLimitExceeded:
		return outcomeOverLimit
	case jrpc.CodeShuttingDown:
		return outcomeShuttingDown
	case jrpc.CodeUnknownChain:
		return outcomeUnknownChain
	default:
		return outcomeRefused
	}
}

// errBusy answers a request that finds max_in_flight requests served.
func errBusy(limit int) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeLimitExceeded, Message: "too many NATS requests in flight: nats.rpc.max_in_flight (" +
		strconv.Itoa(limit) + ") reached; retry shortly"}
}

// errShuttingDown answers a request received while the service stops.
func errShuttingDown() *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeShuttingDown, Message: "server is shutting down"}
}
