package remotes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/remotes/wire"
)

// A transport fault says what it was, in one word, after its text was
// redacted: the word -32050's data and /readyz give.
func TestFailureKind(t *testing.T) {
	refused := testkit.ClosedAddr(t)
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes fail on purpose
	untrusted.StartTLS()
	defer untrusted.Close()
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"refused", "http://" + refused + "/k3yAbCdEf0123456789", wire.FailRefused},
		{"untrusted certificate", untrusted.URL + "/k3yAbCdEf0123456789", wire.FailTLS},
		{"plain http to a tls port", "http://" + tlsPortAnswer(t), "http_status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := wire.New(wire.Options{Name: "alpha", URL: tt.url})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			_, _, err = tr.Call(context.Background(), "eth_chainId", nil)
			if got := failureKind(err); got != tt.want {
				t.Errorf("kind of %v = %q, want %q", err, got, tt.want)
			}
			if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "k3yAbCdEf") {
				t.Errorf("error %q holds the address or the key", err)
			}
		})
	}
	if got := failureKind(fmt.Errorf("x: %w", context.DeadlineExceeded)); got != wire.FailTimeout {
		t.Errorf("deadline kind %q", got)
	}
}

// tlsPortAnswer serves, on a loopback port, what a TLS server (Go's, nginx)
// answers a plain HTTP request: 400 with a line of text. A real TLS port
// reads only the record header before it replies and closes, so the unread
// body makes the close a reset that may reach the client before the reply;
// this one reads the whole request first, so the reply always arrives.
func tlsPortAnswer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}
