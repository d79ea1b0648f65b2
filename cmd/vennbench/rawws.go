package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// rawWS is a subscriber's WebSocket, spoken by hand like rawPoster: one
// buffered read per frame into a reused buffer, nothing allocated per
// notification. Ten thousand of them share the machine's two cores with
// the replica they measure; a library client's per-message costs (a
// goroutine hand-off per read, a fresh buffer per message) would make the
// bench measure mostly itself.
type rawWS struct {
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

const maxRawWSFrame = 4 << 20

// dialRawWS opens a WebSocket to url (ws://127.0.0.1:PORT/PATH).
func dialRawWS(ctx context.Context, target string) (*rawWS, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "ws" {
		return nil, fmt.Errorf("raw websocket: %q is not a ws:// URL", target)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
		base64.StdEncoding.EncodeToString(key[:]) + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 16<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("raw websocket: upgrade answered %s", resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	return &rawWS{conn: conn, br: br, buf: make([]byte, 0, 4<<10)}, nil
}

// write sends one masked frame (a client must mask).
func (w *rawWS) write(opcode byte, payload []byte) error {
	frame := make([]byte, 0, len(payload)+14)
	frame = append(frame, 0x80|opcode)
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	case n < 1<<16:
		frame = append(frame, 0x80|126, byte(n>>8), byte(n))
	default:
		frame = append(frame, 0x80|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	_, err := w.conn.Write(frame)
	return err
}

// writeText sends a text message.
func (w *rawWS) writeText(msg []byte) error { return w.write(0x1, msg) }

// read returns the next data message, valid until the next read; it
// answers pings and ends at a close frame.
func (w *rawWS) read() ([]byte, error) {
	w.buf = w.buf[:0]
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.br, h[:]); err != nil {
			return nil, err
		}
		fin, opcode := h[0]&0x80 != 0, h[0]&0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if h[1]&0x80 != 0 || n > maxRawWSFrame || uint64(len(w.buf))+n > maxRawWSFrame {
			return nil, errors.New("raw websocket: masked or oversized frame from the server")
		}
		start := len(w.buf)
		w.buf = slices.Grow(w.buf, int(n))[:start+int(n)]
		if _, err := io.ReadFull(w.br, w.buf[start:]); err != nil {
			return nil, err
		}
		switch opcode {
		case 0x8:
			return nil, io.EOF
		case 0x9:
			pong := append([]byte(nil), w.buf[start:]...)
			w.buf = w.buf[:start]
			if err := w.write(0xA, pong); err != nil {
				return nil, err
			}
			continue
		case 0xA:
			w.buf = w.buf[:start]
			continue
		}
		if fin {
			return w.buf, nil
		}
	}
}

func (w *rawWS) close() { w.conn.Close() }
