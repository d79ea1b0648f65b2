package fakenode

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

const balanceCall = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","latest"]}`

// BenchmarkGetBalanceCore is the node's own cost of one eth_getBalance:
// parse, dispatch, encode. No HTTP.
func BenchmarkGetBalanceCore(b *testing.B) {
	n := New(Options{})
	defer n.Close()
	body := []byte(balanceCall)
	f := n.faults.Load()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var store [1]message
		msgs, batch, ok := parseBody(body, store[:0])
		n.countMessages(msgs, ok)
		c := &call{ctx: context.Background(), view: n.view.Load()}
		buf = n.answer(c, f, msgs, batch, ok, buf[:0])
	}
	if !bytes.Contains(buf, []byte(`"result":"0x`)) {
		b.Fatalf("answer %s", buf)
	}
}

// BenchmarkGetBalanceHTTP is eth_getBalance over loopback HTTP, as venn's
// benchmarks use the node.
func BenchmarkGetBalanceHTTP(b *testing.B) {
	n := New(Options{})
	if err := n.Start(); err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	url := n.URL()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := hc.Post(url, "application/json", bytes.NewReader([]byte(balanceCall)))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

func BenchmarkGetBlockFull(b *testing.B) {
	n := New(Options{})
	defer n.Close()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",true]}`)
	f := n.faults.Load()
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	for b.Loop() {
		var store [1]message
		msgs, batch, ok := parseBody(body, store[:0])
		c := &call{ctx: context.Background(), view: n.view.Load()}
		buf = n.answer(c, f, msgs, batch, ok, buf[:0])
	}
}
