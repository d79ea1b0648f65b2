package jrpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// rawClient sends and reads bodies as they are on the wire: Go's
// transport would otherwise ask for gzip itself and decode it unseen.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// bigEcho is a call whose answer (its params echoed) is n bytes or more.
func bigEcho(n int) string {
	return `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":["` + strings.Repeat("ab01", n/4) + `"]}`
}

type wireAnswer struct {
	status   int
	encoding string
	vary     string
	length   string
	body     []byte // as sent
}

func postWire(t *testing.T, url string, body []byte, header map[string]string) wireAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return wireAnswer{resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"),
		resp.Header.Get("Content-Length"), b}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func unzstd(t *testing.T, b []byte) []byte {
	t.Helper()
	zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer zd.Close()
	out, err := zd.DecodeAll(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t testing.TB, b []byte) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func TestCompressedReplies(t *testing.T) {
	s := newTestServer(t, Options{Compression: Compression{Replies: true, MinBytes: 1000}}, echoHandler())
	big := []byte(bigEcho(64 << 10))
	plain := postWire(t, s.url(), big, nil)
	if plain.status != http.StatusOK || plain.encoding != "" || !bytes.Contains(plain.body, []byte(`"result":["ab01`)) {
		t.Fatalf("without Accept-Encoding: %d %q %.60s", plain.status, plain.encoding, plain.body)
	}
	if plain.vary != "Accept-Encoding" {
		t.Errorf("Vary = %q, want Accept-Encoding: caches must keep one answer per encoding", plain.vary)
	}

	tests := []struct {
		name   string
		accept string
		want   string // Content-Encoding
	}{
		{"gzip", "gzip", "gzip"},
		{"zstd", "zstd", "zstd"},
		{"both, venn's preference", "gzip, zstd", "zstd"},
		{"the client's weights", "zstd;q=0.5, gzip", "gzip"},
		{"refused by q=0", "zstd;q=0, gzip;q=0", ""},
		{"wildcard", "*", "zstd"},
		{"wildcard but zstd", "*, zstd;q=0", "gzip"},
		{"x-gzip", "x-gzip", "gzip"},
		{"unknown only", "br, deflate", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := postWire(t, s.url(), big, map[string]string{"Accept-Encoding": tt.accept})
			if got.encoding != tt.want {
				t.Fatalf("Content-Encoding = %q, want %q", got.encoding, tt.want)
			}
			if got.length != "" && got.length != strconv.Itoa(len(got.body)) {
				t.Errorf("Content-Length %s for %d bytes", got.length, len(got.body))
			}
			decoded := got.body
			switch tt.want {
			case "gzip":
				decoded = gunzip(t, got.body)
			case "zstd":
				decoded = unzstd(t, got.body)
			}
			if !bytes.Equal(decoded, plain.body) {
				t.Errorf("decoded answer differs from the uncompressed one (%d vs %d bytes)", len(decoded), len(plain.body))
			}
			if tt.want != "" && len(got.body)*10 > len(plain.body) {
				t.Errorf("%d bytes on the wire for %d: not compressed", len(got.body), len(plain.body))
			}
		})
	}

	// Below min_bytes an answer goes as it is.
	small := postWire(t, s.url(), []byte(bigEcho(200)), map[string]string{"Accept-Encoding": "gzip, zstd"})
	if small.encoding != "" || !bytes.Contains(small.body, []byte(`"result"`)) {
		t.Errorf("small answer: Content-Encoding %q, body %.60s", small.encoding, small.body)
	}
}

func TestRepliesOffByDefault(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	got := postWire(t, s.url(), []byte(bigEcho(64<<10)), map[string]string{"Accept-Encoding": "gzip, zstd"})
	if got.encoding != "" || got.vary != "" {
		t.Errorf("compression off: Content-Encoding %q, Vary %q; want neither", got.encoding, got.vary)
	}
}

func TestCompressedRequests(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	body := []byte(bigEcho(32 << 10))
	want := postWire(t, s.url(), body, nil)
	if want.status != http.StatusOK {
		t.Fatalf("plain: %d %.80s", want.status, want.body)
	}
	for _, tt := range []struct {
		enc  string
		body []byte
	}{
		{"gzip", gzipped(t, body)},
		{"x-gzip", gzipped(t, body)},
		{"zstd", zstded(t, body)},
		{"identity", body},
	} {
		t.Run(tt.enc, func(t *testing.T) {
			got := postWire(t, s.url(), tt.body, map[string]string{"Content-Encoding": tt.enc})
			if got.status != http.StatusOK || !bytes.Equal(got.body, want.body) {
				t.Errorf("%s body: %d %.80s; want the plain body's answer", tt.enc, got.status, got.body)
			}
		})
	}
}

func TestBadCompressedRequests(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	body := []byte(call(1, "test_echo"))
	gz := gzipped(t, body)
	zs := zstded(t, body)
	tests := []struct {
		name       string
		enc        string
		body       []byte
		wantStatus int
		wantMsg    string
	}{
		{"not gzip", "gzip", body, http.StatusBadRequest, "request body is not valid gzip"},
		{"truncated gzip", "gzip", gz[:len(gz)-6], http.StatusBadRequest, "request body is not valid gzip: truncated"},
		{"corrupt gzip", "gzip", corrupt(gz), http.StatusBadRequest, "request body is not valid gzip"},
		{"not zstd", "zstd", body, http.StatusBadRequest, "request body is not valid zstd"},
		{"truncated zstd", "zstd", zs[:len(zs)-3], http.StatusBadRequest, "request body is not valid zstd"},
		{"brotli", "br", body, http.StatusUnsupportedMediaType, `unsupported Content-Encoding "br"`},
		{"two encodings", "gzip, zstd", gz, http.StatusUnsupportedMediaType, "unsupported Content-Encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := postWire(t, s.url(), tt.body, map[string]string{"Content-Encoding": tt.enc})
			if got.status != tt.wantStatus {
				t.Errorf("status %d, want %d (%s)", got.status, tt.wantStatus, got.body)
			}
			e := decodeErrorBody(t, got.body)
			if e.Code != CodeInvalidRequest || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("error %d %q, want %d with %q", e.Code, e.Message, CodeInvalidRequest, tt.wantMsg)
			}
		})
	}

	// With requests: false a compressed body is refused, not misread.
	off := false
	s2 := newTestServer(t, Options{Compression: Compression{Requests: &off}}, echoHandler())
	got := postWire(t, s2.url(), gz, map[string]string{"Content-Encoding": "gzip"})
	if got.status != http.StatusUnsupportedMediaType {
		t.Errorf("requests off: status %d, want 415", got.status)
	}
}

func corrupt(b []byte) []byte {
	c := bytes.Clone(b)
	for i := 12; i < len(c)-8; i++ {
		c[i] ^= 0x5a
	}
	return c
}

// repeated concatenates n copies of one compressed member (gzip) or frame
// (zstd) of size zeros: a bomb that claims n*size bytes and costs the
// test one member's encoding.
func repeated(member []byte, n int) []byte {
	return bytes.Repeat(member, n)
}

func TestCompressionBombRefused(t *testing.T) {
	const (
		limit  = 1 << 20
		member = 4 << 20
		copies = 64 // 256 MiB claimed
	)
	s := newTestServer(t, Options{Limits: Limits{MaxBodyBytes: limit}}, echoHandler())
	zeros := make([]byte, member)
	for _, tt := range []struct {
		enc  string
		bomb []byte
	}{
		{"gzip", repeated(gzipped(t, zeros), copies)},
		{"zstd", repeated(zstded(t, zeros), copies)},
	} {
		t.Run(tt.enc, func(t *testing.T) {
			if len(tt.bomb) > limit {
				t.Fatalf("bomb of %d bytes is over the limit itself", len(tt.bomb))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got := postWire(t, s.url(), tt.bomb, map[string]string{"Content-Encoding": tt.enc})
			runtime.ReadMemStats(&after)
			if got.status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413: %s", got.status, got.body)
			}
			e := decodeErrorBody(t, got.body)
			if e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "once decoded from "+tt.enc) {
				t.Errorf("error %d %q, want %d saying the decoded body is over max_body_bytes", e.Code, e.Message, CodeLimitExceeded)
			}
			// The bomb claims 256 MiB; decoding it may cost the limit, a
			// window and the bomb's own bytes, never what it claims.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
				t.Errorf("refusing a %d MiB bomb allocated %d MiB", member*copies>>20, alloc>>20)
			}
		})
	}
}

func TestWebSocketDeflate(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := newTestServer(t, Options{Compression: Compression{WebSocket: on}}, echoHandler())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, resp, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{CompressionMode: websocket.CompressionNoContextTakeover})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		c.SetReadLimit(-1)
		ext := resp.Header.Get("Sec-WebSocket-Extensions")
		if got := strings.Contains(ext, "permessage-deflate"); got != on {
			t.Errorf("websocket: %v: extensions %q", on, ext)
		}
		msg := bigEcho(64 << 10)
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(got, []byte(`"result":["ab01ab01`)) || len(got) < 64<<10 {
			t.Errorf("websocket %v: answer %.80s (%d bytes)", on, got, len(got))
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
		cancel()
	}
}

func TestCompressionValidate(t *testing.T) {
	tests := []struct {
		give Compression
		want string
	}{
		{Compression{}, ""},
		{Compression{Replies: true}, ""},
		{Compression{Encodings: []string{"br"}}, `encodings[0]: must be gzip or zstd, not "br"`},
		{Compression{Encodings: []string{"gzip", "gzip"}}, `encodings[1]: "gzip" is listed twice`},
		{Compression{Replies: true, Encodings: []string{}}, "encodings: at least one is needed"},
		{Compression{MinBytes: -1}, "min_bytes: must not be negative"},
		{Compression{Level: "max"}, `level: must be fastest, default or best, not "max"`},
	}
	for _, tt := range tests {
		err := tt.give.WithDefaults().Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.give, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: %v, want %q", tt.give, err, tt.want)
		}
	}
}

// FuzzDecompress feeds arbitrary bytes to the request decoders: none
// panics, none returns more than the limit, and what decodes is what a
// reference decoder makes of the same bytes.
func FuzzDecompress(f *testing.F) {
	body := []byte(call(1, "test_echo"))
	f.Add(true, gzipped(f, body))
	f.Add(false, zstded(f, body))
	f.Add(true, gzipped(f, make([]byte, 100_000)))
	f.Add(false, zstded(f, make([]byte, 100_000)))
	f.Add(true, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add(false, []byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Add(true, []byte(""))
	const limit = 64 << 10
	cp := newCompressor(Compression{})
	f.Fuzz(func(t *testing.T, isGzip bool, in []byte) {
		enc := encZstd
		if isGzip {
			enc = encGzip
		}
		out, err := cp.decode(enc, bytes.NewReader(in), limit)
		if err != nil {
			var be *errEncoding
			if !errors.As(err, &be) && err != errTooLarge {
				t.Fatalf("error %T %v: neither a bad encoding nor over the limit", err, err)
			}
			return
		}
		if len(out) > limit {
			t.Fatalf("decoded %d bytes past the limit %d", len(out), limit)
		}
		if isGzip {
			zr, err := gzip.NewReader(bytes.NewReader(in))
			if err != nil {
				t.Fatalf("decoded what the reference refuses: %v", err)
			}
			ref, err := io.ReadAll(io.LimitReader(zr, limit+1))
			if err != nil || !bytes.Equal(ref, out) {
				t.Fatalf("decoded %d bytes, reference %d (%v)", len(out), len(ref), err)
			}
		}
	})
}
