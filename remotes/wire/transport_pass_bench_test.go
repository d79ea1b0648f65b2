package wire

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/testkit"
)

// ptServer is a keep-alive HTTP/1.1 JSON-RPC server that hardly allocates
// and answers every call with result framed as mode says: with a
// Content-Length, chunked (as geth sends anything over 2 KB), or gzipped
// and chunked (as a CDN in front of a provider does).
func ptServer(b *testing.B, result, mode string) (url string, stop func()) {
	addr, stop := testkit.ServeTCP(b, func(c net.Conn) { ptServe(c, result, mode) })
	return "http://" + addr, stop
}

func ptServe(c net.Conn, result, mode string) {
	defer c.Close()
	br := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	zw := gzip.NewWriter(io.Discard)
	var body, out, head []byte
	var zb bytes.Buffer
	for {
		var ok bool
		if body, ok = readRawRequest(br, body); !ok {
			return
		}
		out = appendRawReply(out[:0], body, result)
		head = append(head[:0], "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"...)
		switch mode {
		case "length":
			head = append(head, "Content-Length: "...)
			head = strconv.AppendInt(head, int64(len(out)), 10)
			head = append(head, "\r\n\r\n"...)
		case "gzip":
			zb.Reset()
			zw.Reset(&zb)
			zw.Write(out)
			zw.Close()
			out = append(out[:0], zb.Bytes()...)
			head = append(head, "Content-Encoding: gzip\r\n"...)
			fallthrough
		case "chunked":
			head = append(head, "Transfer-Encoding: chunked\r\n\r\n"...)
			head = strconv.AppendInt(head, int64(len(out)), 16)
			head = append(head, "\r\n"...)
			out = append(out, "\r\n0\r\n\r\n"...)
		}
		bw.Write(head)
		bw.Write(out)
		if bw.Flush() != nil {
			return
		}
	}
}

// BenchmarkHTTPTransportPassThrough is one call through the HTTP Transport
// against a local server, by reply size and framing: the cost of reading
// and checking a reply.
func BenchmarkHTTPTransportPassThrough(b *testing.B) {
	for _, size := range []int{32, 4 << 10, 64 << 10, 1 << 20} {
		result := `"0x` + strings.Repeat("ab", size/2) + `"`
		for _, mode := range []string{"length", "chunked", "gzip"} {
			b.Run(strconv.Itoa(size)+"B-"+mode, func(b *testing.B) {
				url, stop := ptServer(b, result, mode)
				defer stop()
				tr, err := New(Options{Name: "bench", URL: url})
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				params := json.RawMessage(`["0x5b38da6a701c568545dcfcb03fcb875f56beddc4","latest"]`)
				b.SetBytes(int64(len(result)))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						res, _, err := tr.Call(context.Background(), "eth_getBalance", params)
						if err != nil || len(res) != len(result) {
							b.Errorf("call = %d bytes, %v", len(res), err)
							return
						}
					}
				})
			})
		}
	}
}
