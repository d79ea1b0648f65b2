package jrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// receiptsResult is an eth_getBlockReceipts result of about size bytes,
// shaped like mainnet's: per transaction a receipt with a few ERC-20
// Transfer logs among a few hundred contracts, hashes and addresses
// random (they do not compress), topics and field names shared (they do).
func receiptsResult(size int) json.RawMessage {
	rng := rand.New(rand.NewPCG(1, 2))
	hex := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, 2+2*n)
		b[0], b[1] = '0', 'x'
		for i := 2; i < len(b); i++ {
			b[i] = digits[rng.IntN(16)]
		}
		return string(b)
	}
	contracts := make([]string, 300)
	for i := range contracts {
		contracts[i] = hex(20)
	}
	const transfer = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
	blockHash := hex(32)
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		tx := hex(32)
		fmt.Fprintf(&b, `{"blockHash":"%s","blockNumber":"0x1406f40","contractAddress":null,"cumulativeGasUsed":"0x%x","effectiveGasPrice":"0x%x","from":"%s","gasUsed":"0x%x","logs":[`,
			blockHash, 21000*(i+1), 1_000_000_000+rng.IntN(1e9), hex(20), 21000+rng.IntN(200000))
		for j := range 1 + rng.IntN(4) {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"address":"%s","topics":["%s","0x000000000000000000000000%s","0x000000000000000000000000%s"],"data":"0x%064x","blockNumber":"0x1406f40","transactionHash":"%s","transactionIndex":"0x%x","blockHash":"%s","logIndex":"0x%x","removed":false}`,
				contracts[rng.IntN(len(contracts))], transfer, hex(20)[2:], hex(20)[2:], rng.Uint64(), tx, i, blockHash, j)
		}
		fmt.Fprintf(&b, `],"logsBloom":"0x%0512x","status":"0x1","to":"%s","transactionHash":"%s","transactionIndex":"0x%x","type":"0x2"}`,
			0, contracts[rng.IntN(len(contracts))], tx, i)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// BenchmarkReplyCompression serves a 2 MB eth_getBlockReceipts answer
// over HTTP, uncompressed and as gzip and zstd at each level: ns/op is the
// server's and the client's CPU for one call (the client reads the bytes
// as sent), wire-bytes what crossed the network.
func BenchmarkReplyCompression(b *testing.B) {
	result := receiptsResult(2 << 20)
	h := HandlerFunc(func(context.Context, *Request) (json.RawMessage, error) { return result, nil })
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockReceipts","params":["0x1406f40"]}`
	for _, tt := range []struct{ name, accept, level string }{
		{"none", "", "fastest"},
		{"gzip-fastest", "gzip", "fastest"},
		{"zstd-fastest", "zstd", "fastest"},
		{"gzip-default", "gzip", "default"},
		{"zstd-default", "zstd", "default"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			s := newTestServer(b, Options{Compression: Compression{Replies: true, Level: tt.level}}, h)
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			var wire int
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, s.url(), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if tt.accept != "" {
					req.Header.Set("Accept-Encoding", tt.accept)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				wire = int(n)
			}
			b.ReportMetric(float64(wire), "wire-bytes")
		})
	}
}

// BenchmarkCompressReceipts is the compression alone of a 2 MB
// eth_getBlockReceipts answer: the CPU venn spends per such answer.
func BenchmarkCompressReceipts(b *testing.B) {
	result := receiptsResult(2 << 20)
	for _, tt := range []struct{ enc, level string }{
		{encGzip, "fastest"}, {encZstd, "fastest"}, {encGzip, "default"}, {encZstd, "default"},
	} {
		b.Run(tt.enc+"-"+tt.level, func(b *testing.B) {
			cp := newCompressor(Compression{Replies: true, Level: tt.level})
			var wire int
			b.SetBytes(int64(len(result)))
			for b.Loop() {
				zb, err := cp.compress(tt.enc, result)
				if err != nil {
					b.Fatal(err)
				}
				wire = zb.Len()
				cp.release(zb)
			}
			b.ReportMetric(float64(wire), "wire-bytes")
		})
	}
}
