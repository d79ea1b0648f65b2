package edge

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientIP is the address r comes from. A peer among the trusted proxies
// speaks for its client: X-Forwarded-For is read from the right (the entry
// the nearest proxy appended) past every trusted proxy, and the first
// address that is not one is the client; entries left of it are whatever
// the client claimed and are ignored. Without X-Forwarded-For, X-Real-IP
// names the client. Any other peer is the client itself, whatever it
// sends, so a client cannot choose the address it is limited under.
func (e *Edge) clientIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer := ap.Addr().Unmap()
	if !e.trusts(peer) {
		return peer
	}
	if ip, ok := forwardedFor(r.Header.Values("X-Forwarded-For"), e.trusts); ok {
		return ip
	}
	if ip, ok := parseForwarded(r.Header.Get("X-Real-IP")); ok {
		return ip
	}
	return peer
}

func (e *Edge) trusts(ip netip.Addr) bool {
	for _, p := range e.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwardedFor walks the X-Forwarded-For values (one header or several,
// in order) from the right. It stops at the first address trusts does not
// hold; if every one is trusted, the leftmost is the client. An entry that
// does not parse ends the walk: nothing left of it can be believed.
func forwardedFor(values []string, trusts func(netip.Addr) bool) (netip.Addr, bool) {
	var (
		last  netip.Addr
		found bool
	)
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			part := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				part, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			ip, ok := parseForwarded(part)
			if !ok {
				return last, found
			}
			if !trusts(ip) {
				return ip, true
			}
			last, found = ip, true
		}
	}
	return last, found
}

// parseForwarded reads one address as proxies write them: bare, or with a
// port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func parseForwarded(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
