package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// Settings of the child servers.
const (
	benchChainID = 1337

	// proxyIdlePerHost matches venn's max_in_flight in the bench config, so
	// neither hop is starved of upstream connections at the top concurrency.
	proxyIdlePerHost = 1024

	readHeaderTimeout = 10 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// serveUpstream is the `vennbench upstream` child: the fake EVM node on its
// own listener, so its CPU is accounted apart from every hop in front of it.
func serveUpstream(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	blockTime := fs.Duration("block-time", 0, "mine a block every this long (0: the chain moves only on "+minePath+")")
	control := fs.Bool("control", false, "serve POST "+minePath+" and GET "+fetchedPath+" (the propagation bench)")
	head := fs.Uint64("head", 0, "the chain's first head (0: the fake node's default)")
	shapeName := fs.String("shape", "", "release real-sized blocks of this chain shape on its schedule (the shape bench): "+shapeNames())
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *blockTime < 0 {
		fmt.Fprintln(stderr, "vennbench upstream: -block-time must not be negative")
		return exitUsage
	}
	node := fakenode.New(fakenode.Options{ChainID: benchChainID, Head: *head})
	defer node.Close()
	st := &upstreamStats{node: node}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+statsPath, st.serve)
	if *control {
		c := newChainControl(node)
		node.SetHook(c.hook)
		mux.HandleFunc("POST "+minePath, c.serveMine)
		mux.HandleFunc("GET "+fetchedPath, c.serveFetched)
	}
	if *shapeName != "" {
		shape, ok := fakenode.ShapeByName(*shapeName)
		if !ok {
			fmt.Fprintf(stderr, "vennbench upstream: no shape %q (%s)\n", *shapeName, shapeNames())
			return exitUsage
		}
		sc, err := fakenode.NewShapeChain(node, shape)
		if err != nil {
			fmt.Fprintf(stderr, "vennbench upstream: %v\n", err)
			return exitError
		}
		mux.HandleFunc("GET "+releasedPath, func(w http.ResponseWriter, _ *http.Request) { serveReleased(w, sc) })
		runCtx, stopChain := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = sc.Run(runCtx) // ends with ctx
		}()
		defer func() { stopChain(); <-done }()
	}
	mux.Handle("/", st.count(node.Handler()))
	if *blockTime > 0 {
		mineCtx, stopMining := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			mineEvery(mineCtx, node, *blockTime)
		}()
		defer func() { stopMining(); <-done }()
	}
	return serveHTTP(ctx, *listen, mux, st, stdout, stderr)
}

// statsPath is where the upstream child reports what reached it, so the
// bench can tell a hop that adds upstream calls or opens a connection per
// call from one that is merely slow.
const statsPath = "/vennbench/stats"

// upstreamStats counts HTTP requests and accepted connections; the node
// counts the state calls among them.
type upstreamStats struct {
	requests atomic.Uint64
	conns    atomic.Uint64
	node     *fakenode.Node
}

// stateMethods are the calls the cache bench sends: the upstream counts
// them apart from the leader's block fetches and the health polls, which
// the HTTP request count includes.
var stateMethods = []string{"eth_call", "eth_getBalance", "eth_getCode"}

// stats is the JSON body of statsPath.
type stats struct {
	Requests uint64 `json:"requests"`
	Conns    uint64 `json:"conns"`
	// State is the number of stateMethods calls that reached the node,
	// every item of a batch counted.
	State uint64 `json:"state"`
	// Calls counts every call that reached the node; Heads those that
	// ask only for the head (eth_blockNumber, the latest block).
	Calls uint64 `json:"calls"`
	Heads uint64 `json:"heads"`
	// Logs counts the calls a filter poll could cost upstream:
	// eth_getLogs and the filter methods themselves.
	Logs uint64 `json:"logs"`
}

func (s *upstreamStats) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	})
}

func (s *upstreamStats) serve(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	st := stats{Requests: s.requests.Load(), Conns: s.conns.Load()}
	if s.node != nil {
		for _, m := range stateMethods {
			st.State += uint64(s.node.Calls(m))
		}
		st.Calls = uint64(s.node.TotalCalls())
		st.Heads = uint64(s.node.Calls("eth_blockNumber") + s.node.CallsAt("eth_getBlockByNumber", "latest"))
		for _, m := range []string{"eth_getLogs", "eth_newFilter", "eth_getFilterChanges", "eth_getFilterLogs"} {
			st.Logs += uint64(s.node.Calls(m))
		}
	}
	_ = json.NewEncoder(w).Encode(st)
}

// countingListener counts accepted connections into conns.
type countingListener struct {
	net.Listener
	conns *atomic.Uint64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Add(1)
	}
	return c, err
}

// serveProxy is the `vennbench proxy` child: the floor cost of one Go HTTP
// hop — a stock ReverseProxy with a keep-alive pool and nothing else.
func serveProxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	to := fs.String("to", "", "upstream URL")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	target, err := url.Parse(*to)
	if err != nil || target.Scheme != "http" || target.Host == "" {
		fmt.Fprintf(stderr, "vennbench proxy: -to must be an http URL, got %q\n", *to)
		return exitUsage
	}
	return serveHTTP(ctx, *listen, newPlainProxy(target), nil, stdout, stderr)
}

// newPlainProxy is the reference hop the issue names: httputil.ReverseProxy
// with a Transport whose idle pool holds a connection per in-flight request.
func newPlainProxy(target *url.URL) *httputil.ReverseProxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = proxyIdlePerHost
	tr.MaxIdleConnsPerHost = proxyIdlePerHost
	return &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: tr,
	}
}

// serveHTTP serves h on addr, prints the base URL as the first line
// of stdout (the parent waits for it) and shuts down when ctx ends. With st
// set, accepted connections are counted into it.
func serveHTTP(ctx context.Context, addr string, h http.Handler, st *upstreamStats, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "vennbench: listen: %v\n", err)
		return exitError
	}
	if st != nil {
		ln = countingListener{Listener: ln, conns: &st.conns}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "http://%s/\n", ln.Addr())

	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "vennbench: serve: %v\n", err)
		return exitError
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "vennbench: serve: %v\n", err)
		return exitError
	}
	return exitOK
}
