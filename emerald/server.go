package emerald

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // clients may send and ask for gzip
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/jrpc"
)

// streamWorkersPerProc sizes grpc-go's pool of stream goroutines. A
// call served on a new goroutine grew its stack through the router's
// frames, copying it each time; a worker's stack stays grown. A stream
// that finds every worker busy (long-lived subscriptions hold theirs)
// gets a goroutine of its own, as without the pool.
const streamWorkersPerProc = 4

// Options are what a Server serves with besides its Config.
type Options struct {
	// Addr is the listener's address (grpc_listen).
	Addr string
	// TLS is the listener's TLS (the HTTP edge's tls section), nil for
	// plain TCP; with ClientCAs and RequireAndVerifyClientCert, mTLS.
	TLS *tls.Config
	// KeyHeader is the header the edge reads API keys from (auth.header);
	// a key sent as "authorization: Bearer KEY" metadata is read as it.
	KeyHeader string
	// MaxItems bounds a NativeCall's items (limits.max_batch_items).
	MaxItems int
	// Version is venn's, for Describe's build_info.
	Version string
	// Permitted lists, of methods, those the caller of in (the call's
	// metadata as headers, its address) may call on in.Chain, as the edge
	// decides: Describe's supportedMethods, the others its
	// excludedMethods. nil: all of them.
	Permitted func(ctx context.Context, in jrpc.Inbound, methods []string) []string
	// Admit is the edge's refusal of the caller of in on in.Chain (nil:
	// admitted), counting none: SubscribeHead, the status streams and
	// Describe serve only a caller it admits. nil: everyone.
	Admit func(ctx context.Context, in jrpc.Inbound) *jrpc.Refusal
	// Take is Admit, and then takes one call from the caller's rate
	// limits as a JSON-RPC call takes it: the opening of SubscribeHead or
	// of a status stream, and a Describe, each cost one (NativeCall's
	// items and NativeSubscribe's eth_subscribe are calls, and pay as
	// such). nil: they cost nothing.
	Take func(ctx context.Context, in jrpc.Inbound) *jrpc.Refusal
	Log  *slog.Logger
}

// Server is the emerald.Blockchain service on its own listener.
type Server struct {
	// Streams serves the head, subscription and status streams (streams.go).
	Streams

	cfg   Config
	opts  Options
	h     Handler
	table Table
	log   *slog.Logger

	so      []grpc.ServerOption // srv's, built by Start
	mu      sync.Mutex
	srv     *grpc.Server // nil before Start
	ln      net.Listener
	serving atomic.Bool
	done    chan struct{} // closed when Serve returns
}

// New returns the service, serving with h the chains that table lists.
// It listens from Start.
func New(cfg Config, opts Options, h Handler, table Table) *Server {
	cfg = cfg.WithDefaults()
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, opts: opts, h: h, table: table, log: opts.Log, done: make(chan struct{})}
	s.Streams = Streams{Chain: s.streamChain, Chains: s.streamChains, Open: s.openStream, Changed: table.Changed,
		Heartbeat: cfg.Heartbeat, Recheck: cfg.StatusRecheck, stopping: make(chan struct{})}
	k := cfg.Keepalive
	so := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRecvBytes),
		grpc.MaxSendMsgSize(cfg.MaxSendBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: k.Time, Timeout: k.Timeout,
			MaxConnectionIdle: k.MaxConnectionIdle, MaxConnectionAge: k.MaxConnectionAge}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: k.MinTime,
			PermitWithoutStream: k.PermitWithoutStream}),
		grpc.NumStreamWorkers(uint32(streamWorkersPerProc * runtime.GOMAXPROCS(0))),
	}
	if opts.TLS != nil {
		so = append(so, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.so = so
	return s
}

// Start listens and serves in the background. A listener that dies after
// start calls fail.
func (s *Server) Start(_ context.Context, fail func()) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("grpc: listen %s: %w", s.opts.Addr, err)
	}
	// grpc.NewServer starts the stream workers: a Server never started
	// has none to stop.
	srv := grpc.NewServer(s.so...)
	pb.RegisterBlockchainServer(srv, s)
	if s.cfg.ReflectionOn() {
		reflection.Register(srv)
	}
	s.mu.Lock()
	s.ln, s.srv = ln, srv
	s.mu.Unlock()
	s.serving.Store(true)
	s.log.Info("listening", "server", "grpc", "addr", ln.Addr().String(), "tls", s.opts.TLS != nil)
	go func() {
		defer close(s.done)
		err := srv.Serve(ln)
		s.serving.Store(false)
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("grpc server failed", "err", err)
			if fail != nil {
				fail()
			}
		}
	}()
	return nil
}

// Addr is the address listened on, nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serving reports whether the listener is up, for /readyz.
func (s *Server) Serving() bool { return s.serving.Load() }

// Stop stops gracefully: no new calls or streams, those running finish
// (streams end with a status, not a reset). After grpc.stop_timeout, or
// when ctx ends, the connections are closed.
func (s *Server) Stop(ctx context.Context) error {
	s.serving.Store(false)
	s.Streams.stop() // the streams end with UNAVAILABLE: GracefulStop need not wait for them
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil // never started
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	t := time.NewTimer(s.cfg.StopTimeout)
	defer t.Stop()
	var err error
	select {
	case <-stopped:
	case <-t.C:
		srv.Stop()
		<-stopped
		err = fmt.Errorf("grpc: graceful stop took over %s: connections closed", s.cfg.StopTimeout)
	case <-ctx.Done():
		srv.Stop()
		<-stopped
		err = fmt.Errorf("grpc: graceful stop: %w", ctx.Err())
	}
	<-s.done
	return err
}

// chains lists the chains served now.
func (s *Server) chains() []Chain { return s.table.Chains() }

// chain is the chain ref names, or UNAVAILABLE naming the chains served.
func (s *Server) chain(ref pb.ChainRef) (Chain, error) {
	cs := s.chains()
	if c, ok := find(cs, ref); ok {
		return c, nil
	}
	return Chain{}, status.Errorf(codes.Unavailable, "chain %s is not served here; served: %s", refName(ref), served(cs))
}

// header is the call's metadata as an HTTP request's headers, for the
// Gate: the API key (auth.header, or authorization: Bearer KEY),
// x-request-id, traceparent.
func (s *Server) header(ctx context.Context) http.Header {
	md, _ := metadata.FromIncomingContext(ctx)
	h := make(http.Header, len(md))
	for k, vs := range md {
		if strings.HasPrefix(k, ":") || strings.HasSuffix(k, "-bin") {
			continue
		}
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if kh := s.opts.KeyHeader; kh != "" && !strings.EqualFold(kh, "authorization") && h.Get(kh) == "" {
		if tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok {
			h.Set(kh, strings.TrimSpace(tok))
		}
	}
	return h
}

// streamChain is Streams.Chain: the chain served as ref, for the stream
// whose context is ctx.
func (s *Server) streamChain(ctx context.Context, ref pb.ChainRef) (StreamChain, error) {
	c, err := s.chain(ref)
	if err != nil {
		return nil, err
	}
	if c.Window == nil {
		return nil, status.Errorf(codes.Unavailable, "chain %s has no head window on this replica", refName(ref))
	}
	if err := s.admit(ctx, c); err != nil {
		return nil, err
	}
	return s.served1(ctx, c), nil
}

// streamChains is Streams.Chains: every chain served with a head window
// that the caller may read; with none, the edge's refusal.
func (s *Server) streamChains(ctx context.Context) ([]ServedChain, error) {
	var out []ServedChain
	var refused error
	for _, c := range s.chains() {
		r := c.Ref()
		if r == pb.ChainRef_CHAIN_UNSPECIFIED || c.Window == nil {
			continue
		}
		if err := s.admit(ctx, c); err != nil {
			refused = err
			continue
		}
		out = append(out, ServedChain{Ref: r, Chain: s.served1(ctx, c)})
	}
	if len(out) == 0 && refused != nil {
		return nil, refused
	}
	return out, nil
}

// admit is nil when the edge admits the caller of the stream or call
// whose context is ctx on c (its API key or token, the key's chains), else
// the status it is refused with. The head and status streams and Describe
// call no method: this is the edge's look at them.
func (s *Server) admit(ctx context.Context, c Chain) error {
	if s.opts.Admit == nil {
		return nil
	}
	return refusedStatus(s.opts.Admit(ctx, s.inbound(ctx, c.Name)))
}

// take is admit, and takes one call from the caller's rate limits: what
// opening a head or status stream, or a Describe, costs.
func (s *Server) take(ctx context.Context, c Chain) error {
	if s.opts.Take == nil {
		return nil
	}
	return refusedStatus(s.opts.Take(ctx, s.inbound(ctx, c.Name)))
}

// openStream is Streams.Open: the stream whose context is ctx, opened on
// the chain served as ref, costs its caller one call.
func (s *Server) openStream(ctx context.Context, ref pb.ChainRef) error {
	c, err := s.chain(ref)
	if err != nil {
		return err
	}
	return s.take(ctx, c)
}

// refusedStatus is the status of a stream or Describe the edge refuses
// (nil: none): NativeCall's for a request refused as a whole, with the
// wait a Retry-After would have told; any other refusal over a limit (a
// tenant's credit budget) RESOURCE_EXHAUSTED, the rest PERMISSION_DENIED.
func refusedStatus(r *jrpc.Refusal) error {
	if r == nil {
		return nil
	}
	c := codes.PermissionDenied
	if st := refusal(r.Err); st != nil {
		c = status.Code(st)
	} else if r.Status == http.StatusTooManyRequests {
		c = codes.ResourceExhausted
	}
	return status.Error(c, refusedMessage(r.Err, r.RetryAfter))
}

func (s *Server) served1(ctx context.Context, c Chain) servedChain {
	return servedChain{inboundCaller: inboundCaller{h: s.h, in: s.inbound(ctx, c.Name)}, c: c}
}

// inbound is the caller of the call or stream whose context is ctx, on
// chain, as the jrpc handler and the edge read it.
func (s *Server) inbound(ctx context.Context, chain string) jrpc.Inbound {
	in := jrpc.Inbound{Chain: chain, Transport: Transport, Header: s.header(ctx)}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		in.RemoteAddr = p.Addr.String()
	}
	return in
}
