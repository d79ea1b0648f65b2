package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/emerald"
)

// HTTP server timeouts. Only headers and idle keep-alives are bounded by
// http.Server on the JSON-RPC server: WebSocket connections and long
// eth_getLogs calls outlive any whole-request read or write timeout, so jrpc
// bounds bodies (limits.http_read_timeout, max_body_bytes), answers
// (limits.http_write_timeout), requests in flight (limits.max_http_in_flight)
// and calls itself.
const (
	readHeaderTimeout = 10 * time.Second
	// maxHeaderBytes bounds a JSON-RPC request's headers: clients send a
	// handful; Go's default (1 MiB) lets each connection pin far more.
	maxHeaderBytes = 64 << 10
	// idleTimeout outlasts the usual load balancer idle timeout (60 s), so
	// the balancer, not venn, closes idle keep-alives and never sends a
	// request on a connection venn is closing.
	idleTimeout = 120 * time.Second
	// metricsTimeout bounds a whole scrape or probe.
	metricsTimeout = 30 * time.Second
)

// httpService is one http.Server on a listener bound at start.
type httpService struct {
	name string
	addr string
	log  *slog.Logger
	srv  *http.Server

	tls   TLSConfig     // zero: plain TCP
	bound net.Addr      // set by start; what addr resolved to (port 0)
	done  chan struct{} // closed when Serve returns
}

// start binds synchronously, so a taken port fails the app's start, then
// serves in a goroutine that stop waits for.
func (h *httpService) start(ctx context.Context, fail func()) error {
	var lc net.ListenConfig
	var tc *tls.Config
	if h.tls.Enabled() {
		// Read at start, not in Validate: check-config does no file I/O,
		// and certificates are often mounted only where venn runs.
		var err error
		if tc, err = h.tls.tlsConfig(); err != nil {
			return fmt.Errorf("%s server: %w", h.name, err)
		}
	}
	ln, err := lc.Listen(ctx, "tcp", h.addr)
	if err != nil {
		return fmt.Errorf("%s server: %w", h.name, err)
	}
	h.bound = ln.Addr()
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("server stopped", "server", h.name, "err", err)
			fail()
		}
	}()
	h.log.Info("listening", "server", h.name, "addr", h.bound.String(), "tls", tc != nil)
	return nil
}

func (h *httpService) stop(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	<-h.done // Serve returns as soon as Shutdown closes the listener
	if err != nil {
		return fmt.Errorf("%s server: %w", h.name, err)
	}
	return nil
}

// servers are the process's HTTP listeners.
type servers struct {
	rpc     *httpService
	metrics *httpService // nil when metrics_listen is ""
	// grpc is the gRPC server (grpc.go), for /readyz; nil without
	// grpc_listen. Set after the servers are built.
	grpc atomic.Pointer[emerald.Server]
}

// TLSConfig is the tls section: TLS on listen, with client certificates
// required when ClientCAFile is set.
type TLSConfig struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether listen serves TLS.
func (t TLSConfig) Enabled() bool { return t.CertFile != "" }

// tlsConfig loads the listener's certificate and, with client_ca_file,
// requires every client to present a certificate signed by that CA.
// HTTP/2 is not offered: WebSocket upgrades need HTTP/1.1.
func (t TLSConfig) tlsConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load cert_file and key_file: %w", err)
	}
	c := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tls: client_ca_file: no PEM certificate in it")
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}
