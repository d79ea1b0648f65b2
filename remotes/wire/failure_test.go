package wire

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// One rule for every text venn shows of a remote: a public host name is
// shown (it says which provider failed and is no secret), a private host
// (an IP, a bare name, an internal domain) is redacted, and keys in paths,
// queries, user info, subdomains and headers are always redacted.
func TestRedactHosts(t *testing.T) {
	const key = "k3yAbCdEf0123456789"
	tests := []struct {
		name    string
		url     string
		headers http.Header
		give    string
		keep    []string // must still be there
		gone    []string // must not
	}{
		{name: "public host in a DNS error", url: "https://eth.llamarpc.com",
			give: "lookup eth.llamarpc.com on [address]: no such host",
			keep: []string{"lookup eth.llamarpc.com on [address]: no such host"}},
		{name: "public host, key in the path", url: "https://eth-mainnet.g.alchemy.com/v2/" + key,
			give: `Post "https://eth-mainnet.g.alchemy.com/v2/` + key + `": EOF`,
			keep: []string{"eth-mainnet.g.alchemy.com"}, gone: []string{key}},
		{name: "public host, key in the query", url: "https://rpc.example.io/eth?apikey=" + key,
			give: "invalid apikey " + key + " for rpc.example.io",
			keep: []string{"rpc.example.io"}, gone: []string{key}},
		{name: "public host, key in a subdomain", url: "https://" + key + ".rpc.example.io",
			give: "lookup " + key + ".rpc.example.io: no such host",
			keep: []string{".rpc.example.io"}, gone: []string{key}},
		{name: "public host, key in user info", url: "https://user:" + key + "@rpc.example.io",
			give: "auth for user:" + key + " at rpc.example.io refused",
			keep: []string{"rpc.example.io"}, gone: []string{key}},
		{name: "public host, key in a header", url: "https://rpc.example.io",
			headers: http.Header{"Authorization": {"Bearer " + key}},
			give:    "bad token " + key + " at rpc.example.io",
			keep:    []string{"rpc.example.io"}, gone: []string{key}},
		{name: "IP host echoed by the node", url: "http://10.20.30.40:8545/" + key,
			give: "execution reverted: call to http://10.20.30.40:8545/" + key + " refused",
			keep: []string{"execution reverted"}, gone: []string{"10.20.30.40", key}},
		{name: "IP host without a path", url: "http://10.20.30.40:8545",
			give: "upstream 10.20.30.40:8545 answered 502",
			keep: []string{"answered 502"}, gone: []string{"10.20.30.40"}},
		{name: "IPv6 host", url: "http://[fd00::17]:8545",
			give: "dial [fd00::17]:8545 failed", gone: []string{"fd00::17"}},
		{name: "internal domain", url: "http://geth.internal:8545",
			give: "lookup geth.internal: no such host", gone: []string{"geth.internal"}},
		{name: "cluster-local domain", url: "http://geth.chains.svc.cluster.local:8545",
			give: "lookup geth.chains.svc.cluster.local: no such host", gone: []string{"geth.chains.svc"}},
		{name: "bare name with a port", url: "http://node:8545",
			give: `Post "http://node:8545": missing trie node`,
			keep: []string{"missing trie node"}, gone: []string{"node:8545"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Name: "alpha", URL: tt.url, Headers: tt.headers}
			got := opts.Redactor().Redact(tt.give)
			for _, k := range tt.keep {
				if !strings.Contains(got, k) {
					t.Errorf("%q lost %q", got, k)
				}
			}
			for _, g := range tt.gone {
				if strings.Contains(strings.ToLower(got), strings.ToLower(g)) {
					t.Errorf("%q still holds %q", got, g)
				}
			}
		})
	}
}

func TestPrivateHost(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"eth.llamarpc.com", false},
		{"eth-mainnet.g.alchemy.com", false},
		{"mainnet.infura.io", false},
		{"rpc.ankr.com.", false},
		{"node.example.co.uk", false},
		{"10.0.0.5", true},
		{"8.8.8.8", true}, // an IP literal is a node's address, public or not
		{"::1", true},
		{"[fd00::1]", true},
		{"localhost", true},
		{"geth", true},
		{"geth.internal", true},
		{"erigon.local", true},
		{"node.lan", true},
		{"node.home.arpa", true},
		{"geth.svc.cluster.local", true},
		{"node.test", true},
	}
	for _, tt := range tests {
		if got := PrivateHost(tt.give); got != tt.want {
			t.Errorf("PrivateHost(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ give, want string }{
		{"https://eth.llamarpc.com", "https://eth.llamarpc.com"},
		{"https://eth-mainnet.g.alchemy.com/v2/k3yAbCdEf0123456789", "https://eth-mainnet.g.alchemy.com/[redacted]"},
		{"wss://k3yAbCdEf0123456789.rpc.example.io/ws", "wss://[redacted].rpc.example.io/[redacted]"},
		{"https://user:pw@rpc.example.io", "https://rpc.example.io/[redacted]"},
		{"https://rpc.example.io:8443?key=abc", "https://rpc.example.io:8443/[redacted]"},
		{"http://10.1.2.3:8545", "http://[redacted]:8545"},
		{"http://geth.internal:8545/", "http://[redacted]:8545"},
		{"not a url", "[redacted]"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.give); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// A transport fault keeps its kind once its text is redacted: the word
// -32050's data and /readyz give.
func TestTransportFailureKind(t *testing.T) {
	// Names do not resolve in tests (they talk only to loopback): the
	// resolver's error is built as net/http returns it.
	dns := &url.Error{Op: "Post", URL: "https://eth.example.io/k3yAbCdEf0123456789",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "eth.example.io", IsNotFound: true}}}
	opts := Options{Name: "alpha", URL: "https://eth.example.io/k3yAbCdEf0123456789"}
	err := transportFailure("alpha", opts.Redactor(), "send", dns)
	if got := FailureKind(err); got != FailDNS {
		t.Errorf("kind of %v = %q, want dns", err, got)
	}
	if !strings.Contains(err.Error(), "lookup eth.example.io") || !errors.Is(err, ErrTransport) {
		t.Errorf("error %q: want the public host named, and ErrTransport", err)
	}
}
