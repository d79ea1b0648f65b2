package wire

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/venn-gateway/venn/jrpc"
)

// Header passthrough: named client headers (a provider's own routing
// headers) and, optionally, the client's address as X-Forwarded-For go
// on the HTTP requests a client's call makes to a remote. They are read
// from the call's jrpc.Peer; calls venn makes itself (heads, probes)
// carry none. A call shared with identical calls in flight carries the
// first caller's.

// neverForwarded are headers a remote must never get from a client:
// venn's own credentials (its API key and bearer headers; the app adds the
// configured auth.header), the connection's own, and those venn sets.
var neverForwarded = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
	"X-Api-Key":           true,
	"Host":                true,
	"Content-Length":      true,
	"Content-Type":        true,
	"Content-Encoding":    true,
	"Accept-Encoding":     true,
	"Transfer-Encoding":   true,
	"Connection":          true,
	"Keep-Alive":          true,
	"Upgrade":             true,
	"Te":                  true,
	"Trailer":             true,
	"Traceparent":         true,
	"Tracestate":          true,
	"X-Forwarded-For":     true, // forward_client_ip sends venn's own
	// Either would make net/http resend a write (replayHeaders).
	"Idempotency-Key":   true,
	"X-Idempotency-Key": true,
}

// NeverForwarded reports whether a header may not be named in
// forward_headers.
func NeverForwarded(name string) bool { return neverForwarded[http.CanonicalHeaderKey(name)] }

// Forwarding is what a remote's HTTP requests copy from the client.
type Forwarding struct {
	headers  []string // canonical
	clientIP bool
}

// NewForwarding forwards headers (but those never forwarded, each once)
// and, with clientIP, the client's address; nil when it forwards nothing.
func NewForwarding(headers []string, clientIP bool) *Forwarding {
	if len(headers) == 0 && !clientIP {
		return nil
	}
	f := &Forwarding{clientIP: clientIP}
	for _, h := range headers {
		h = http.CanonicalHeaderKey(h)
		if !slices.Contains(f.headers, h) && !neverForwarded[h] {
			f.headers = append(f.headers, h)
		}
	}
	return f
}

// header is tmpl with the client's headers of ctx's call added; nil when
// the call has no client or the client sent none of them.
func (f *Forwarding) header(ctx context.Context, tmpl http.Header) http.Header {
	p, ok := jrpc.PeerFromContext(ctx)
	if !ok {
		return nil
	}
	var h http.Header
	for _, name := range f.headers {
		vs := p.Header[name]
		if len(vs) == 0 {
			continue
		}
		if h == nil {
			h = maps.Clone(tmpl)
		}
		h[name] = vs
	}
	if f.clientIP {
		if ip := clientAddr(p); ip.IsValid() {
			if h == nil {
				h = maps.Clone(tmpl)
			}
			h["X-Forwarded-For"] = []string{ip.String()}
		}
	}
	return h
}

// clientAddr is the client's address: as the edge worked it out (behind
// trusted proxies), else the connection's peer.
func clientAddr(p jrpc.Peer) netip.Addr {
	if p.ClientIP.IsValid() {
		return p.ClientIP.Unmap()
	}
	host, _, err := net.SplitHostPort(p.RemoteAddr)
	if err != nil {
		host = p.RemoteAddr
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}
