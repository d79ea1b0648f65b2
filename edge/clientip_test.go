package edge

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
)

func TestClientIP(t *testing.T) {
	e := New(Config{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"}}, Options{})
	tests := []struct {
		name   string
		peer   string
		xff    []string
		realIP string
		want   string
	}{
		{name: "untrusted peer", peer: "203.0.113.5:4000", want: "203.0.113.5"},
		{name: "untrusted peer's headers ignored", peer: "203.0.113.5:4000", xff: []string{"198.51.100.1"}, realIP: "198.51.100.2", want: "203.0.113.5"},
		{name: "trusted peer, one hop", peer: "10.1.2.3:4000", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "spoofed entries left of the client", peer: "10.1.2.3:4000", xff: []string{"1.2.3.4, 5.6.7.8, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "chain of trusted proxies", peer: "10.1.2.3:4000", xff: []string{"198.51.100.1, 10.9.9.9, 10.8.8.8"}, want: "198.51.100.1"},
		{name: "several headers, in order", peer: "10.1.2.3:4000", xff: []string{"1.2.3.4", "198.51.100.1, 10.9.9.9"}, want: "198.51.100.1"},
		{name: "all trusted: the leftmost", peer: "10.1.2.3:4000", xff: []string{"10.7.7.7, 10.8.8.8"}, want: "10.7.7.7"},
		{name: "garbage stops the walk", peer: "10.1.2.3:4000", xff: []string{"198.51.100.1, garbage, 10.8.8.8"}, want: "10.8.8.8"},
		{name: "entry with a port", peer: "10.1.2.3:4000", xff: []string{"198.51.100.1:5555"}, want: "198.51.100.1"},
		{name: "X-Real-IP", peer: "10.1.2.3:4000", realIP: "198.51.100.3", want: "198.51.100.3"},
		{name: "X-Forwarded-For before X-Real-IP", peer: "10.1.2.3:4000", xff: []string{"198.51.100.1"}, realIP: "198.51.100.3", want: "198.51.100.1"},
		{name: "bad X-Real-IP", peer: "10.1.2.3:4000", realIP: "nope", want: "10.1.2.3"},
		{name: "trusted v6 proxy", peer: "[2001:db8:ffff::1]:443", xff: []string{"2001:db8:1::5"}, want: "2001:db8:1::5"},
		{name: "v4-mapped peer", peer: "[::ffff:10.1.2.3]:4000", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "unparsable peer", peer: "pipe", want: "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/test", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if tt.realIP != "" {
				r.Header.Set("X-Real-IP", tt.realIP)
			}
			if got := e.clientIP(r).String(); got != tt.want {
				t.Errorf("clientIP = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIPBucket(t *testing.T) {
	tests := []struct{ give, want string }{
		{give: "198.51.100.7", want: "ip:198.51.100.7"},
		{give: "2001:db8:1:2:3:4:5:6", want: "ip:2001:db8:1:2::/64"},
		{give: "2001:db8:1:2::9", want: "ip:2001:db8:1:2::/64"},
		{give: "fe80::1%eth0", want: "ip:fe80::/64"},
	}
	for _, tt := range tests {
		if got := jrpc.AddrBucket(netip.MustParseAddr(tt.give)); got != tt.want {
			t.Errorf("jrpc.AddrBucket(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
	if got := jrpc.AddrBucket(netip.Addr{}); got != "ip:unknown" {
		t.Errorf("jrpc.AddrBucket(invalid) = %s", got)
	}
}
