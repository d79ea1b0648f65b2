package jrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression is the compression section: gzip and zstd on HTTP answers
// for clients that accept them, compressed request bodies, and WebSocket
// permessage-deflate. Replies are compressed only when the operator says
// so (it costs CPU per call); compressed requests are always decoded,
// within max_body_bytes of decoded JSON.
type Compression struct {
	// Replies compresses HTTP answers of at least MinBytes for clients
	// whose Accept-Encoding names one of Encodings.
	Replies bool `yaml:"replies"`
	// Encodings venn may answer with, in its own order of preference when
	// a client weighs them alike: gzip, zstd (default [zstd, gzip]).
	Encodings []string `yaml:"encodings"`
	// MinBytes is the smallest answer compressed (default 1024): below it
	// the headers and the CPU cost more than the bytes saved.
	MinBytes int `yaml:"min_bytes"`
	// Level is fastest (the default), default or best: the encoders' own
	// levels of the same names.
	Level string `yaml:"level"`
	// Requests decodes request bodies sent with Content-Encoding gzip or
	// zstd (default true). A pointer: absent (on) differs from false.
	Requests *bool `yaml:"requests"`
	// WebSocket negotiates permessage-deflate (without context takeover)
	// with clients that offer it; off by default.
	WebSocket bool `yaml:"websocket"`
}

// Defaults of the compression section.
const (
	DefaultCompressMinBytes = 1024
	DefaultCompressLevel    = "fastest"
)

// The encodings venn speaks.
const (
	encGzip = "gzip"
	encZstd = "zstd"
)

// WithDefaults fills the zero fields with their defaults.
func (c Compression) WithDefaults() Compression {
	if c.Encodings == nil {
		c.Encodings = []string{encZstd, encGzip}
	}
	if c.MinBytes == 0 {
		c.MinBytes = DefaultCompressMinBytes
	}
	if c.Level == "" {
		c.Level = DefaultCompressLevel
	}
	if c.Requests == nil {
		on := true
		c.Requests = &on
	}
	return c
}

// Validate reports every problem of a defaulted section, each naming its
// field as the file spells it.
func (c Compression) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, e := range c.Encodings {
		switch {
		case e != encGzip && e != encZstd:
			errs = append(errs, fmt.Errorf("encodings[%d]: must be gzip or zstd, not %q", i, e))
		case seen[e]:
			errs = append(errs, fmt.Errorf("encodings[%d]: %q is listed twice", i, e))
		}
		seen[e] = true
	}
	if c.Replies && len(c.Encodings) == 0 {
		errs = append(errs, errors.New("encodings: at least one is needed when replies is true"))
	}
	if c.MinBytes < 0 {
		errs = append(errs, errors.New("min_bytes: must not be negative"))
	}
	switch c.Level {
	case "fastest", "default", "best":
	default:
		errs = append(errs, fmt.Errorf("level: must be fastest, default or best, not %q", c.Level))
	}
	return errors.Join(errs...)
}

// compressor compresses answers and decodes compressed bodies; nil
// compresses no answer (requests are still decoded by a zero one).
type compressor struct {
	replies  bool
	prefer   []string // encodings offered, in venn's order
	minBytes int
	requests bool

	gzipLevel int
	gzipW     sync.Pool // *gzip.Writer
	zstdEnc   *zstd.Encoder
	outBufs   sync.Pool // *bytes.Buffer for compressed answers
	gzipR     sync.Pool // *gzip.Reader
	zstdR     sync.Pool // *zstd.Decoder
}

// newCompressor compiles a defaulted, validated section. Its zstd encoder
// starts no goroutine until it encodes.
func newCompressor(c Compression) *compressor {
	c = c.WithDefaults()
	cp := &compressor{
		replies:  c.Replies,
		prefer:   c.Encodings,
		minBytes: c.MinBytes,
		requests: *c.Requests,
	}
	zl := zstd.SpeedFastest
	cp.gzipLevel = gzip.BestSpeed
	switch c.Level {
	case "default":
		zl, cp.gzipLevel = zstd.SpeedDefault, gzip.DefaultCompression
	case "best":
		zl, cp.gzipLevel = zstd.SpeedBestCompression, gzip.BestCompression
	}
	if c.Replies && hasEnc(c.Encodings, encZstd) {
		// EncodeAll only: no stream, no goroutine of its own; the window
		// need not exceed an answer, which is whole in memory.
		cp.zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zl),
			zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	}
	return cp
}

func hasEnc(list []string, e string) bool {
	for _, x := range list {
		if x == e {
			return true
		}
	}
	return false
}

// choose picks the encoding for an answer to a request whose
// Accept-Encoding is accept: the one the client weighs highest among
// those offered (ties: venn's order), or "" for none. q=0 refuses one;
// "*" stands for every encoding not named.
func (cp *compressor) choose(accept string) string {
	if cp == nil || !cp.replies || accept == "" {
		return ""
	}
	best, bestQ := "", 0.0
	for _, enc := range cp.prefer {
		if q := acceptQ(accept, enc); q > bestQ {
			best, bestQ = enc, q
		}
	}
	return best
}

// acceptQ is the weight Accept-Encoding header v gives encoding enc: its
// own entry's q, else "*"'s, else 0.
func acceptQ(v, enc string) float64 {
	star := -1.0
	for v != "" {
		var item string
		item, v, _ = strings.Cut(v, ",")
		name, params, _ := strings.Cut(item, ";")
		name = strings.TrimSpace(name)
		q := 1.0
		if p := strings.TrimSpace(params); p != "" {
			if qs, ok := strings.CutPrefix(strings.ToLower(p), "q="); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(qs), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				} else {
					q = 0
				}
			}
		}
		switch {
		case strings.EqualFold(name, enc) || enc == encGzip && strings.EqualFold(name, "x-gzip"):
			return q
		case name == "*":
			star = q
		}
	}
	return max(star, 0)
}

// compress encodes out with enc into a pooled buffer; release returns it.
func (cp *compressor) compress(enc string, out []byte) (b *bytes.Buffer, err error) {
	b, _ = cp.outBufs.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	b.Reset()
	switch enc {
	case encZstd:
		b.Grow(len(out)/4 + 64)
		b.Write(cp.zstdEnc.EncodeAll(out, b.AvailableBuffer()))
	default:
		zw, _ := cp.gzipW.Get().(*gzip.Writer)
		if zw == nil {
			zw, _ = gzip.NewWriterLevel(b, cp.gzipLevel) // the level is validated
		} else {
			zw.Reset(b)
		}
		if _, err = zw.Write(out); err == nil {
			err = zw.Close()
		}
		cp.gzipW.Put(zw)
	}
	return b, err
}

// maxPooledCompressed caps the answer buffers kept for reuse.
const maxPooledCompressed = 1 << 20

func (cp *compressor) release(b *bytes.Buffer) {
	if b.Cap() <= maxPooledCompressed {
		cp.outBufs.Put(b)
	}
}

// errEncoding is what decoding a compressed body found wrong: the
// encoding is unknown, or the bytes are not what it says.
type errEncoding struct {
	unsupported bool
	enc         string
	err         error
}

func (e *errEncoding) Error() string {
	if e.unsupported {
		return "unsupported Content-Encoding " + strconv.Quote(e.enc)
	}
	return "request body is not valid " + e.enc + ": " + e.err.Error()
}

// contentEncoding reads a request's Content-Encoding: "" for none or
// identity, gzip, zstd, or an *errEncoding.
func (cp *compressor) contentEncoding(v string) (string, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	switch v {
	case "", "identity":
		return "", nil
	case "gzip", "x-gzip":
		if cp.requests {
			return encGzip, nil
		}
	case encZstd:
		if cp.requests {
			return encZstd, nil
		}
	}
	if len(v) > 32 {
		v = v[:32] + "..."
	}
	return "", &errEncoding{unsupported: true, enc: v}
}

// maxZstdWindow caps the window a zstd body may ask for above the body
// limit: encoders may declare 8 MiB (the format's usual cap) for a body
// of any size, and the decoder grows its window only as bytes arrive.
const maxZstdWindow = 8 << 20

// decode reads the body raw, compressed with enc, into a new buffer of at
// most limit decoded bytes (errTooLarge past it): a bomb costs at most
// limit bytes and the decoder's window, never the size it claims. A body
// that does not decode is an *errEncoding; raw's own errors (deadline,
// size, the client leaving) come back as they are.
func (cp *compressor) decode(enc string, raw io.Reader, limit int64) ([]byte, error) {
	src := &errReader{r: raw}
	var (
		body []byte
		err  error
	)
	switch enc {
	case encGzip:
		zr, _ := cp.gzipR.Get().(*gzip.Reader)
		if zr == nil {
			zr = new(gzip.Reader)
		}
		if err = zr.Reset(src); err == nil {
			body, err = readLimited(zr, 0, limit)
			_ = zr.Close()
			cp.gzipR.Put(zr)
		}
	case encZstd:
		zd, _ := cp.zstdR.Get().(*zstd.Decoder)
		if zd == nil {
			win := uint64(max(limit, maxZstdWindow))
			// Concurrency 1: the stream is decoded on this goroutine, and
			// a pooled decoder holds no goroutine.
			zd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(win), zstd.WithDecoderMaxMemory(win))
			if err != nil {
				return nil, fmt.Errorf("zstd decoder: %w", err)
			}
		}
		if err = zd.Reset(src); err == nil {
			body, err = readLimited(zd, 0, limit)
		}
		_ = zd.Reset(nil)
		cp.zstdR.Put(zd)
	}
	switch {
	case err == nil:
		return body, nil
	case src.err != nil:
		return nil, src.err // the wire's fault, not the encoding's
	case errors.Is(err, errTooLarge):
		return nil, err
	}
	return nil, &errEncoding{enc: enc, err: cleanDecodeErr(err)}
}

// cleanDecodeErr keeps a decoder's message short and free of package
// prefixes a client cannot act on.
func cleanDecodeErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated")
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "gzip: ")
	msg = strings.TrimPrefix(msg, "zstd: ")
	if len(msg) > 120 {
		msg = msg[:120] + "..."
	}
	return errors.New(msg)
}

// errReader remembers the first error of its reader that is not EOF, so
// that a decoder's wrapping of it cannot hide it.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

func errBadEncoding(e *errEncoding) *Error {
	return &Error{Code: CodeInvalidRequest, Message: e.Error()}
}

func errDecodedTooLarge(enc string, limit int64) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "request body exceeds max_body_bytes (" +
		strconv.FormatInt(limit, 10) + " bytes) once decoded from " + enc}
}

// Header values shared by every answer (net/http copies a handler's
// header before it writes it).
var (
	varyAcceptEncoding = []string{"Accept-Encoding"}
	gzipEncoding       = []string{encGzip}
	zstdEncoding       = []string{encZstd}
)

func encodingHeader(enc string) []string {
	if enc == encZstd {
		return zstdEncoding
	}
	return gzipEncoding
}

// wsCompression is the permessage-deflate mode upgrades offer. Without
// context takeover a connection keeps no compression window between
// messages: a few KiB per connection instead of 32 KiB or more.
func (s *Server) wsCompression() websocket.CompressionMode {
	if s.wsDeflate {
		return websocket.CompressionNoContextTakeover
	}
	return websocket.CompressionDisabled
}
