package reqlog

import (
	"context"
	"io"
	"net/netip"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
)

// BenchmarkRecord is the request log's cost on a call's own goroutine:
// the hook that queues a line (drained by the writer, to io.Discard).
func BenchmarkRecord(b *testing.B) {
	l := New(Config{Enabled: true}.WithDefaults(), io.Discard, nil, nil, keccakTx)
	if err := l.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Stop(context.Background()) }()
	c := call("eth_getBalance", `["0x00000000000000000000000000000000000000aa","latest"]`,
		&jrpc.Peer{Transport: "http", RequestID: "5f1c0e2a9b3d-1a", ClientIP: netip.MustParseAddr("203.0.113.77")})
	b.ReportAllocs()
	for b.Loop() {
		l.Record(c)
	}
}

// BenchmarkLine is the writer's cost per line: encoding one.
func BenchmarkLine(b *testing.B) {
	l := New(Config{Enabled: true}.WithDefaults(), io.Discard, nil, nil, keccakTx)
	c := call("eth_getBalance", `["0x00000000000000000000000000000000000000aa","latest"]`,
		&jrpc.Peer{Transport: "http", RequestID: "5f1c0e2a9b3d-1a", ClientIP: netip.MustParseAddr("203.0.113.77")})
	e := entry{start: c.Start, id: c.Peer.RequestID, chain: c.Chain, method: c.Method, transport: "http",
		ip: c.Peer.ClientIP, batch: -1, note: c.Note, took: c.Duration, outcome: "ok", status: 200, in: 90, out: 60}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = l.appendLine(buf[:0], &e)
	}
}
