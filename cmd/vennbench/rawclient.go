package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawPoster is a load worker's own keep-alive HTTP/1.1 connection, spoken
// by hand: one write per request, one buffered read per reply, nothing
// allocated per call. It exists because the load generator shares the
// machine's cores with the targets: net/http's client costs ~70-90 µs of
// CPU per call here, more than a venn follower spends answering one, so
// with it the bench measured mostly the client. Both targets get the same
// client, so the comparison stays fair; it only leaves the cores to the
// servers, as a client on another machine would.
type rawPoster struct {
	addr    string // host:port
	head    []byte // "POST path HTTP/1.1\r\nHost: ...\r\nContent-Type: ...\r\nContent-Length: "
	conn    net.Conn
	br      *bufio.Reader
	req     []byte
	unwatch func() bool // stops closing conn when the run's context ends
}

// Limits of the raw client's reply parsing.
const (
	rawReadBuffer = 64 << 10
	maxHeaderLine = 8 << 10
)

// errPoster fails every call with err.
type errPoster struct{ err error }

func (p errPoster) post(context.Context, []byte, *bytes.Buffer) error { return p.err }
func (errPoster) close()                                              {}

// rawPosters returns a factory of raw posters for target.
func rawPosters(target string) func() poster {
	return func() poster {
		p, err := newRawPoster(target)
		if err != nil {
			return errPoster{err}
		}
		return p
	}
}

// newRawPoster returns a poster for target, an http:// URL on 127.0.0.1.
// It dials on first use, and again after any error.
func newRawPoster(target string) (*rawPoster, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("raw client: %q is not an http URL", target)
	}
	path := u.RequestURI()
	p := &rawPoster{addr: u.Host}
	p.head = append(p.head, "POST "+path+" HTTP/1.1\r\nHost: "+u.Host+
		"\r\nContent-Type: application/json\r\nContent-Length: "...)
	return p, nil
}

var _ poster = (*rawPoster)(nil)

func (p *rawPoster) post(ctx context.Context, body []byte, reply *bytes.Buffer) error {
	if p.conn == nil {
		if err := p.dial(ctx); err != nil {
			return err
		}
	}
	p.req = append(p.req[:0], p.head...)
	p.req = strconv.AppendInt(p.req, int64(len(body)), 10)
	p.req = append(p.req, "\r\n\r\n"...)
	p.req = append(p.req, body...)
	err := p.roundTrip(reply)
	if err != nil {
		p.close() // the connection's state is unknown: start afresh
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

func (p *rawPoster) dial(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return fmt.Errorf("raw client: %w", err)
	}
	p.conn = c
	if p.br == nil {
		p.br = bufio.NewReaderSize(c, rawReadBuffer)
	} else {
		p.br.Reset(c)
	}
	// An interrupt must not wait for requestTimeout: closing the
	// connection ends the read at once.
	p.unwatch = context.AfterFunc(ctx, func() { c.Close() })
	return nil
}

// roundTrip writes p.req and reads one reply's body into reply.
func (p *rawPoster) roundTrip(reply *bytes.Buffer) error {
	if err := p.conn.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return err
	}
	if _, err := p.conn.Write(p.req); err != nil {
		return fmt.Errorf("raw client: write: %w", err)
	}
	line, err := p.line()
	if err != nil {
		return err
	}
	// "HTTP/1.1 200 OK". The line is bufio's memory, which the reads
	// below may overwrite: keep the code, not the slice.
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return fmt.Errorf("raw client: bad status line %.100q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return fmt.Errorf("raw client: bad status line %.100q", line)
	}
	length, chunked, closing := -1, false, false
	for {
		h, err := p.line()
		if err != nil {
			return err
		}
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return fmt.Errorf("raw client: bad header %.100q", h)
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 0 || n > maxReplyBytes {
				return fmt.Errorf("raw client: Content-Length %.40q", v)
			}
			length = n
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			closing = bytes.EqualFold(v, []byte("close"))
		}
	}
	reply.Reset()
	switch {
	case chunked:
		err = p.readChunked(reply)
	case length >= 0:
		err = p.readN(reply, length)
	default:
		return errors.New("raw client: reply without a length")
	}
	if err != nil {
		return err
	}
	if closing {
		p.close()
	}
	if status != 200 {
		return fmt.Errorf("HTTP %d: %.200s", status, reply.Bytes())
	}
	return nil
}

// line reads one CRLF-terminated line, without its terminator. It is
// valid until the next read.
func (p *rawPoster) line() ([]byte, error) {
	l, err := p.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(l) > maxHeaderLine {
		return nil, errors.New("raw client: header line too long")
	}
	if err != nil {
		return nil, fmt.Errorf("raw client: read: %w", err)
	}
	l = l[:len(l)-1]
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, nil
}

// readN appends n bytes of the reply to reply.
func (p *rawPoster) readN(reply *bytes.Buffer, n int) error {
	if reply.Len()+n > maxReplyBytes {
		return errors.New("raw client: reply too long")
	}
	reply.Grow(n)
	buf := reply.AvailableBuffer()[:n]
	if _, err := io.ReadFull(p.br, buf); err != nil {
		return fmt.Errorf("raw client: read body: %w", err)
	}
	reply.Write(buf) // buf is reply's own spare room: this only extends it
	return nil
}

// readChunked reads a chunked body into reply.
func (p *rawPoster) readChunked(reply *bytes.Buffer) error {
	for {
		l, err := p.line()
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(l, ';'); i >= 0 {
			l = l[:i] // chunk extensions
		}
		size, err := strconv.ParseUint(string(bytes.TrimSpace(l)), 16, 31)
		if err != nil {
			return fmt.Errorf("raw client: chunk size %.40q", l)
		}
		if size == 0 {
			for { // trailers, up to the empty line
				t, err := p.line()
				if err != nil {
					return err
				}
				if len(t) == 0 {
					return nil
				}
			}
		}
		if err := p.readN(reply, int(size)); err != nil {
			return err
		}
		if crlf, err := p.line(); err != nil || len(crlf) != 0 {
			return errors.New("raw client: chunk not followed by CRLF")
		}
	}
}

func (p *rawPoster) close() {
	if p.conn == nil {
		return
	}
	p.unwatch()
	p.conn.Close()
	p.conn = nil
}
