package app

import (
	"strings"
	"testing"
)

func TestCompressionConfig(t *testing.T) {
	c := mustParse(t, minimal+`
compression:
  replies: true
  encodings: [gzip]
  min_bytes: 4096
  level: best
  requests: false
  websocket: true
`)
	got := c.Compression
	if !got.Replies || len(got.Encodings) != 1 || got.Encodings[0] != "gzip" || got.MinBytes != 4096 ||
		got.Level != "best" || got.Requests == nil || *got.Requests || !got.WebSocket {
		t.Errorf("compression = %+v", got)
	}

	d := mustParse(t, minimal).Compression
	if d.Replies || d.MinBytes != 1024 || d.Level != "fastest" || d.Requests == nil || !*d.Requests || d.WebSocket ||
		strings.Join(d.Encodings, ",") != "zstd,gzip" {
		t.Errorf("defaults = %+v", d)
	}

	_, err := Parse([]byte(minimal + "compression:\n  encodings: [br]\n  level: max\n"))
	for _, want := range []string{`compression.encodings[0]: must be gzip or zstd, not "br"`, `compression.level: must be fastest, default or best`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

func TestStaticAnswersConfig(t *testing.T) {
	c := mustParse(t, minimal+`    static_answers:
      - method: net_version
        result: "1"
      - method: eth_call
        params: [{to: "0x00000000000000000000000000000000000000bb"}, latest]
        error: {code: 3, message: execution reverted}
`)
	if got := c.Chains[0].StaticAnswers; len(got) != 2 || got[0].Method != "net_version" || got[1].Error == nil {
		t.Errorf("static_answers = %+v", got)
	}
	_, err := Parse([]byte(minimal + "    static_answers:\n      - method: net_version\n"))
	if want := "chains[0].static_answers[0].result: required (or error)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestForwardHeadersConfig(t *testing.T) {
	c := mustParse(t, minimal+`    forward_headers: [X-Provider-Route]
    forward_client_ip: true
`)
	if got := c.Chains[0].Pool; len(got.ForwardHeaders) != 1 || !got.ForwardClientIP {
		t.Errorf("chain forwarding = %v %v", got.ForwardHeaders, got.ForwardClientIP)
	}
	_, err := Parse([]byte("auth:\n  header: X-Venn-Key\n" + minimal + "    forward_headers: [x-venn-key]\n"))
	if want := `chains[0].forward_headers: "x-venn-key" is auth.header`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestShadowAndRoutesConfig(t *testing.T) {
	c := mustParse(t, minimal+`      - name: candidate
        url: http://127.0.0.1:18546
        shadow: true
        shadow_sample: 0.25
      - name: protect
        url: http://127.0.0.1:18547
        group: relays
    transaction_routes:
      - methods: [eth_sendRawTransaction, eth_sendBundle]
        group: relays
        tenants: [team-a]
`)
	ch := c.Chains[0]
	if len(ch.Remotes) != 3 || !ch.Remotes[1].Shadow || ch.Remotes[2].Group != "relays" || len(ch.Pool.TxRoutes) != 1 {
		t.Errorf("remotes %+v, routes %+v", ch.Remotes, ch.Pool.TxRoutes)
	}
	_, err := Parse([]byte(minimal + "    transaction_routes:\n      - methods: [eth_sendRawTransaction]\n        group: nope\n"))
	if want := `chains[0].transaction_routes[0].group: "nope": no remote of the chain is in this group`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}
