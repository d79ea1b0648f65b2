package wire

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jsonscan"
)

// The secret parts of every test URL. No error or log may contain them.
const (
	tpSecretPath  = "/v3/SECRETPATHKEY123"
	tpSecretQuery = "apikey=SECRETQUERYKEY456"
)

func tpSecretURL(base string) string { return base + tpSecretPath + "?" + tpSecretQuery }

func tpAssertNoSecret(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(s, "SECRET") {
		t.Errorf("secret leaked: %q", s)
	}
}

// tpNoLeaks checks, after every cleanup registered later has run, that the
// test left no goroutine behind.
func tpNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// tpRequest is a call as a fake remote sees it.
type tpRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func tpNewHTTP(t *testing.T, opts Options, h http.HandlerFunc, configure ...func(*http.Server)) (*httpTransport, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	for _, f := range configure {
		f(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	opts.URL = tpSecretURL(srv.URL)
	if opts.Name == "" {
		opts.Name = "alpha"
	}
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(tr.Close)
	return tr.(*httpTransport), srv
}

func TestHTTPTransportReplies(t *testing.T) {
	tpNoLeaks(t)
	const limit = 1024
	big := `"0x` + strings.Repeat("ab", limit) + `"`
	tests := []struct {
		name     string
		status   int
		give     string // the reply body; ID stands for the call's id
		chunked  bool   // no Content-Length
		gzip     bool
		truncate bool // promise more bytes than sent, then hang up
		// gzipCorrupt: a gzip body whose checksum is wrong
		gzipCorrupt bool
		encoding    string // a Content-Encoding venn did not ask for

		wantTooLarge bool   // a *ReplyTooLargeError
		wantBody     string // HTTPStatusError's body when not give; "-" for none

		want           string // the result, when the call succeeds
		wantIs         []error
		wantCode       int // UpstreamError's code
		wantHTTPStatus int // UpstreamError's or HTTPStatusError's status
		wantStatusErr  bool
	}{
		{name: "result", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":"0x10"}`, want: `"0x10"`},
		{
			name: "any member order and spacing", status: 200,
			give: " {\n \"result\" : {\"a\":[1,-2.5e3,{\"b\":null,\"c\":\"q\\\"\\u00e9\"}],\"t\":true} , \"id\" : ID , \"jsonrpc\":\"2.0\" } ",
			want: `{"a":[1,-2.5e3,{"b":null,"c":"q\"\u00e9"}],"t":true}`,
		},
		{name: "result null", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":null}`, want: `null`},
		{name: "error null beside result", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":"0x1","error":null}`, want: `"0x1"`},
		{name: "string id", status: 200, give: `{"jsonrpc":"2.0","id":"ID","result":"0x1"}`, want: `"0x1"`},
		{name: "escaped key", status: 200, give: `{"jsonrpc":"2.0","\u0069d":ID,"result":"0x1"}`, want: `"0x1"`},
		{name: "chunked", status: 200, chunked: true, give: `{"jsonrpc":"2.0","id":ID,"result":"0x2"}`, want: `"0x2"`},
		{name: "gzip", status: 200, gzip: true, give: `{"jsonrpc":"2.0","id":ID,"result":"0x3"}`, want: `"0x3"`},
		{
			name: "error with 200", status: 200,
			give:     `{"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":"execution reverted","data":"0x08c3"}}`,
			wantCode: -32000, wantHTTPStatus: 200,
		},
		{
			name: "error with 429", status: 429,
			give:     `{"jsonrpc":"2.0","id":ID,"error":{"code":-32005,"message":"rate limited"}}`,
			wantCode: -32005, wantHTTPStatus: 429,
		},
		{
			name: "error with 400 and null id", status: 400,
			give:     `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`,
			wantCode: -32600, wantHTTPStatus: 400,
		},
		{name: "503 text", status: 503, give: "upstream unavailable", wantStatusErr: true, wantHTTPStatus: 503},
		{name: "502 json not json-rpc", status: 502, give: `{"message":"bad gateway"}`, wantStatusErr: true, wantHTTPStatus: 502},
		{name: "302 redirect not followed", status: 302, give: "", wantStatusErr: true, wantHTTPStatus: 302},
		{name: "garbage 200", status: 200, give: "<html>oops</html>", wantIs: []error{ErrBadReply}},
		{name: "empty 200", status: 200, give: "", wantIs: []error{ErrBadReply}},
		{name: "cut JSON", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":"0x`, wantIs: []error{ErrBadReply}},
		{name: "bad number", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":01}`, wantIs: []error{ErrBadReply}},
		{name: "bad escape", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":"\x"}`, wantIs: []error{ErrBadReply}},
		{name: "trailing bytes", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":1} x`, wantIs: []error{ErrBadReply}},
		{name: "array", status: 200, give: `[{"jsonrpc":"2.0","id":ID,"result":"0x1"}]`, wantIs: []error{ErrBadReply}},
		{
			name: "both result and error", status: 200,
			give:   `{"jsonrpc":"2.0","id":ID,"result":"0x1","error":{"code":1,"message":"x"}}`,
			wantIs: []error{ErrBadReply},
		},
		{name: "neither result nor error", status: 200, give: `{"jsonrpc":"2.0","id":ID}`, wantIs: []error{ErrBadReply}},
		{name: "other call's id", status: 200, give: `{"jsonrpc":"2.0","id":987654321,"result":"0x1"}`, wantIs: []error{ErrBadReply}},
		{name: "error not an object", status: 200, give: `{"jsonrpc":"2.0","id":ID,"error":"boom"}`, wantIs: []error{ErrBadReply}},
		{name: "oversize", status: 200, give: `{"jsonrpc":"2.0","id":ID,"result":` + big + `}`, wantTooLarge: true},
		{name: "oversize chunked", status: 200, chunked: true, give: `{"jsonrpc":"2.0","id":ID,"result":` + big + `}`, wantTooLarge: true},
		{name: "oversize gzip", status: 200, gzip: true, give: `{"jsonrpc":"2.0","id":ID,"result":` + big + `}`, wantTooLarge: true},
		{name: "at the cap", status: 200, chunked: true, give: `{"jsonrpc":"2.0","id":ID,"result":"` + strings.Repeat("a", limit-len(`{"jsonrpc":"2.0","id":1,"result":""}`)) + `"}`,
			want: `"` + strings.Repeat("a", limit-len(`{"jsonrpc":"2.0","id":1,"result":""}`)) + `"`},
		// A huge error page is still the status it came with: only its start is read.
		{name: "oversize error status", status: 500, give: big, wantStatusErr: true, wantHTTPStatus: 500, wantBody: big[:statusBodyMax]},
		{name: "garbage 200 chunked", status: 200, chunked: true, give: "  <html>" + big, wantIs: []error{ErrBadReply}},
		{name: "corrupt gzip", status: 200, gzipCorrupt: true, give: `{"jsonrpc":"2.0","id":ID,"result":"0x3"}`, wantIs: []error{ErrBadReply}},
		{name: "unsupported encoding", status: 200, encoding: "br", give: "\x1b\x00", wantIs: []error{ErrBadReply}},
		{name: "error page in an unsupported encoding", status: 503, encoding: "br", give: "\x1b\x00", wantStatusErr: true, wantHTTPStatus: 503, wantBody: "-"},
		{name: "body cut short", status: 200, truncate: true, give: `{"jsonrpc":"2.0","id":ID,"res`, wantIs: []error{ErrTransport}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := tpNewHTTP(t, Options{MaxResponseBytes: limit}, func(w http.ResponseWriter, r *http.Request) {
				var req tpRequest
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
					t.Errorf("decode request: %v", err)
				}
				body := strings.ReplaceAll(tt.give, "ID", string(req.ID))
				switch {
				case tt.truncate:
					conn, bw, err := http.NewResponseController(w).Hijack()
					if err != nil {
						t.Errorf("hijack: %v", err)
						return
					}
					fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body)+100, body)
					bw.Flush()
					conn.Close()
				case tt.gzip:
					w.Header().Set("Content-Encoding", "gzip")
					w.WriteHeader(tt.status)
					zw := gzip.NewWriter(w)
					io.WriteString(zw, body)
					zw.Close()
				case tt.gzipCorrupt:
					var zb bytes.Buffer
					zw := gzip.NewWriter(&zb)
					io.WriteString(zw, body)
					zw.Close()
					z := zb.Bytes()
					z[len(z)-5] ^= 0xff // the CRC-32
					w.Header().Set("Content-Encoding", "gzip")
					w.WriteHeader(tt.status)
					w.Write(z)
				case tt.chunked:
					w.WriteHeader(tt.status)
					half := len(body) / 2
					io.WriteString(w, body[:half])
					http.NewResponseController(w).Flush()
					io.WriteString(w, body[half:])
				default:
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
					if tt.encoding != "" {
						w.Header().Set("Content-Encoding", tt.encoding)
					}
					if tt.status == http.StatusFound {
						w.Header().Set("Location", "/elsewhere")
					}
					w.WriteHeader(tt.status)
					io.WriteString(w, body)
				}
			})

			got, status, err := tr.Call(context.Background(), "eth_test", nil)
			if err != nil {
				tpAssertNoSecret(t, err.Error())
			}
			if status != tt.status { // for the attempt's span
				t.Errorf("status %d, want the reply's %d", status, tt.status)
			}
			switch {
			case tt.want != "":
				if err != nil || string(got) != tt.want {
					t.Fatalf("call = %s, %v; want %s", got, err, tt.want)
				}
			case tt.wantCode != 0:
				var ue *UpstreamError
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v; want *UpstreamError", err)
				}
				if ue.Err.Code != tt.wantCode || ue.HTTPStatus != tt.wantHTTPStatus || ue.Remote != "alpha" {
					t.Errorf("UpstreamError = %+v %+v; want code %d status %d", ue, ue.Err, tt.wantCode, tt.wantHTTPStatus)
				}
			case tt.wantStatusErr:
				var se *HTTPStatusError
				if !errors.As(err, &se) {
					t.Fatalf("err = %v; want *HTTPStatusError", err)
				}
				wantBody := tt.give
				switch tt.wantBody {
				case "":
				case "-": // none
					wantBody = ""
				default:
					wantBody = tt.wantBody
				}
				if se.Status != tt.wantHTTPStatus || se.Body != wantBody {
					t.Errorf("HTTPStatusError = %+v; want status %d body %q", se, tt.wantHTTPStatus, wantBody)
				}
			case tt.wantTooLarge:
				var over *ReplyTooLargeError
				if !errors.As(err, &over) || over.Limit != limit || over.Remote != "alpha" {
					t.Fatalf("err = %v; want a *ReplyTooLargeError of remote alpha over %d bytes", err, limit)
				}
			default:
				for _, want := range tt.wantIs {
					if !errors.Is(err, want) {
						t.Errorf("err = %v; want %v", err, want)
					}
				}
				if err == nil {
					t.Errorf("call = %s; want an error", got)
				}
			}
		})
	}
}

func TestHTTPTransportRequest(t *testing.T) {
	tpNoLeaks(t)
	type seen struct {
		body, contentType, apiKey, ua, path, query string
	}
	got := make(chan seen, 1)
	tr, _ := tpNewHTTP(t, Options{Headers: http.Header{"X-Api-Key": {"k1"}}}, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{string(b), r.Header.Get("Content-Type"), r.Header.Get("X-Api-Key"), r.Header.Get("User-Agent"), r.URL.Path, r.URL.RawQuery}
		var req tpRequest
		json.Unmarshal(b, &req)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":true}`, req.ID)
	})

	tests := []struct {
		name         string
		method       string
		params       string
		wantEnvelope string // the body, with ID for the id
	}{
		{"params", "eth_getBalance", `["0xabc","latest"]`, `{"jsonrpc":"2.0","id":ID,"method":"eth_getBalance","params":["0xabc","latest"]}`},
		{"no params", "eth_blockNumber", ``, `{"jsonrpc":"2.0","id":ID,"method":"eth_blockNumber","params":[]}`},
		{"object params", "x_y", `{"a":1}`, `{"jsonrpc":"2.0","id":ID,"method":"x_y","params":{"a":1}}`},
		{"method quoted", "a\"b\n", `[]`, `{"jsonrpc":"2.0","id":ID,"method":"a\"b\n","params":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := tr.Call(context.Background(), tt.method, json.RawMessage(tt.params)); err != nil {
				t.Fatalf("call: %v", err)
			}
			s := <-got
			var req tpRequest
			if err := json.Unmarshal([]byte(s.body), &req); err != nil {
				t.Fatalf("request is not JSON: %q", s.body)
			}
			if want := strings.ReplaceAll(tt.wantEnvelope, "ID", string(req.ID)); s.body != want {
				t.Errorf("body = %s; want %s", s.body, want)
			}
			if s.contentType != "application/json" || s.apiKey != "k1" || s.ua != "venn" {
				t.Errorf("headers: content-type %q, x-api-key %q, user-agent %q", s.contentType, s.apiKey, s.ua)
			}
			if s.path != tpSecretPath || s.query != tpSecretQuery {
				t.Errorf("path %q query %q; want the configured ones", s.path, s.query)
			}
		})
	}
}

// Replies of every kind must leave the connection reusable: a gateway that
// redials per call cannot keep up.
func TestHTTPTransportReusesConnections(t *testing.T) {
	tpNoLeaks(t)
	var n, conns atomic.Int64
	countConns := func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
	}
	tr, _ := tpNewHTTP(t, Options{}, func(w http.ResponseWriter, r *http.Request) {
		var req tpRequest
		json.NewDecoder(r.Body).Decode(&req)
		switch n.Add(1) % 4 {
		case 0:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0x1"}`, req.ID)
		case 1:
			w.WriteHeader(429)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32005,"message":"slow down"}}`, req.ID)
		case 2:
			w.WriteHeader(503)
			io.WriteString(w, "busy")
		case 3:
			io.WriteString(w, `{"jsonrpc":"2.0","id":`)
			http.NewResponseController(w).Flush()
			fmt.Fprintf(w, `%s,"result":"0x2"}`, req.ID)
		}
	}, countConns)
	for range 40 {
		tr.Call(context.Background(), "eth_blockNumber", nil)
	}
	if c := conns.Load(); c != 1 {
		t.Errorf("%d connections for 40 sequential calls; want 1", c)
	}
}

func TestHTTPTransportConnectionRefused(t *testing.T) {
	tpNoLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	tr, err := New(Options{Name: "alpha", URL: tpSecretURL("http://" + addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, _, err = tr.Call(context.Background(), "eth_blockNumber", nil)
	if !errors.Is(err, ErrTransport) {
		t.Fatalf("err = %v; want ErrTransport", err)
	}
	if !strings.Contains(err.Error(), "remote alpha") {
		t.Errorf("err = %q; want the remote's name", err)
	}
	tpAssertNoSecret(t, err.Error())
}

func TestHTTPTransportContext(t *testing.T) {
	tpNoLeaks(t)
	release := make(chan struct{})
	tr, _ := tpNewHTTP(t, Options{}, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)

	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			_, _, err := tr.Call(ctx, "eth_blockNumber", nil)
			if !errors.Is(err, tt.want) || errors.Is(err, ErrTransport) {
				t.Fatalf("err = %v; want %v and not ErrTransport", err, tt.want)
			}
			tpAssertNoSecret(t, err.Error())
		})
	}
}

func TestNewTransportURL(t *testing.T) {
	tpNoLeaks(t)
	tests := []struct {
		give    string
		wantErr string // "" for a valid URL
		wantWS  bool
	}{
		{give: "http://127.0.0.1:1/SECRETPATH?k=SECRETQ"},
		{give: "HTTPS://example.com/SECRETPATH"},
		{give: "ws://127.0.0.1:1/SECRETPATH", wantWS: true},
		{give: "wss://example.com/SECRETPATH?k=SECRETQ", wantWS: true},
		{give: "ftp://example.com/SECRETPATH", wantErr: "remote alpha: url: unsupported scheme"},
		{give: "example.com/SECRETPATH", wantErr: "remote alpha: url: missing scheme"},
		{give: "http:///SECRETPATH", wantErr: "remote alpha: url: missing host"},
		{give: "http://example.com:SECRETPORT/x", wantErr: "remote alpha: url: cannot parse"},
		{give: "http://exa mple.com/SECRET%zz", wantErr: "remote alpha: url: cannot parse"},
		{give: "", wantErr: "remote alpha: url: missing scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			tr, err := New(Options{Name: "alpha", URL: tt.give})
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
				tpAssertNoSecret(t, err.Error())
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			defer tr.Close()
			if _, isWS := tr.(*wsTransport); isWS != tt.wantWS {
				t.Errorf("Transport %T; want ws %v", tr, tt.wantWS)
			}
		})
	}
	if _, err := New(Options{URL: "http://example.com"}); err == nil {
		t.Error("no error for a Transport without a name")
	}
}

func TestParseEnvelopeDepth(t *testing.T) {
	deep := `{"id":1,"result":` + strings.Repeat("[", jsonscan.MaxDepth+2) + strings.Repeat("]", jsonscan.MaxDepth+2) + `}`
	if _, err := parseEnvelope([]byte(deep)); err == nil {
		t.Error("no error for JSON nested past the limit")
	}
	ok := `{"id":1,"result":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`
	if _, err := parseEnvelope([]byte(ok)); err != nil {
		t.Errorf("nested 100 deep: %v", err)
	}
}

// ---- WebSocket ----

// tpWSServer is a fake remote speaking JSON-RPC over WebSocket. Its methods:
// echo (result = params), null, fail (error object), big (an oversize
// result, id first), bigidlast (oversize, id last), notify (a subscription
// notification, then the reply), never (no reply), drop (hang up), hold
// (replies held until params[0] are held, then sent in reverse order).
type tpWSServer struct {
	srv      *httptest.Server
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	conns    atomic.Int64
	received chan string // methods, as they arrive
	bigSize  int
}

func tpNewWSServer(t *testing.T, bigSize int) *tpWSServer {
	t.Helper()
	s := &tpWSServer{received: make(chan string, 100), bigSize: bigSize}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.close)
	return s
}

func (s *tpWSServer) url() string { return tpSecretURL("ws" + strings.TrimPrefix(s.srv.URL, "http")) }

// close stops the server and waits for every connection's handler: the
// server forgets hijacked connections.
func (s *tpWSServer) close() {
	s.cancel()
	s.srv.Close()
	s.wg.Wait()
}

func (s *tpWSServer) serve(w http.ResponseWriter, r *http.Request) {
	s.wg.Add(1)
	defer s.wg.Done()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	s.conns.Add(1)
	c.SetReadLimit(1 << 20)
	var held []tpRequest
	reply := func(id json.RawMessage, member string) {
		c.Write(s.ctx, websocket.MessageText, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,%s}`, id, member))
	}
	for {
		_, data, err := c.Read(s.ctx)
		if err != nil {
			return
		}
		var req tpRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return
		}
		select {
		case s.received <- req.Method:
		default:
		}
		big := `"` + strings.Repeat("a", s.bigSize) + `"`
		switch req.Method {
		case "echo":
			reply(req.ID, `"result":`+string(req.Params))
		case "null":
			reply(req.ID, `"result":null`)
		case "fail":
			reply(req.ID, `"error":{"code":-32000,"message":"execution reverted"}`)
		case "big":
			reply(req.ID, `"result":`+big)
		case "bigidlast":
			c.Write(s.ctx, websocket.MessageText, fmt.Appendf(nil, `{"jsonrpc":"2.0","result":%s,"id":%s}`, big, req.ID))
		case "notify":
			c.Write(s.ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x1","result":{}}}`))
			c.Write(s.ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":"not ours","result":1}`))
			c.Write(s.ctx, websocket.MessageText, []byte(`not json at all`))
			reply(req.ID, `"result":"after notify"`)
		case "never":
		case "drop":
			return
		case "hold":
			held = append(held, req)
			var p []json.RawMessage
			json.Unmarshal(req.Params, &p)
			if len(p) > 0 && string(p[0]) == strconv.Itoa(len(held)) {
				for i := len(held) - 1; i >= 0; i-- {
					reply(held[i].ID, `"result":`+string(held[i].Params))
				}
				held = nil
			}
		}
	}
}

func tpNewWS(t *testing.T, url string, limit int64) *wsTransport {
	t.Helper()
	tr, err := New(Options{Name: "alpha", URL: url, MaxResponseBytes: limit})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(tr.Close)
	return tr.(*wsTransport)
}

func TestWSTransportCall(t *testing.T) {
	tpNoLeaks(t)
	srv := tpNewWSServer(t, 2048)
	tr := tpNewWS(t, srv.url(), 1024)

	tests := []struct {
		method   string
		params   string
		want     string
		wantIs   []error
		wantCode int
		// wantTooLarge: a *ReplyTooLargeError, and the remote is not blamed
		wantTooLarge bool
	}{
		{method: "echo", params: `["0x1",{"a":[true,null]}]`, want: `["0x1",{"a":[true,null]}]`},
		{method: "null", want: `null`},
		{method: "notify", want: `"after notify"`},
		{method: "fail", wantCode: -32000},
		{method: "big", wantTooLarge: true},
		{method: "echo", params: `[1]`, want: `[1]`}, // the connection survived the oversize reply
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			got, _, err := tr.Call(context.Background(), tt.method, json.RawMessage(tt.params))
			if err != nil {
				tpAssertNoSecret(t, err.Error())
			}
			switch {
			case tt.want != "":
				if err != nil || string(got) != tt.want {
					t.Fatalf("call = %s, %v; want %s", got, err, tt.want)
				}
			case tt.wantCode != 0:
				var ue *UpstreamError
				if !errors.As(err, &ue) || ue.Err.Code != tt.wantCode || ue.HTTPStatus != 0 {
					t.Fatalf("err = %v; want UpstreamError %d with no HTTP status", err, tt.wantCode)
				}
			case tt.wantTooLarge:
				if _, ok := errors.AsType[*ReplyTooLargeError](err); !ok {
					t.Fatalf("err = %v; want a *ReplyTooLargeError", err)
				}
			default:
				for _, want := range tt.wantIs {
					if !errors.Is(err, want) {
						t.Errorf("err = %v; want %v", err, want)
					}
				}
			}
		})
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections; want 1", n)
	}
}

func TestWSTransportMultiplexes(t *testing.T) {
	tpNoLeaks(t)
	srv := tpNewWSServer(t, 0)
	tr := tpNewWS(t, srv.url(), 0)

	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			// Each params is unique; the server answers in reverse order.
			params := fmt.Sprintf(`[%d,"call-%d"]`, n, i)
			got, _, err := tr.Call(context.Background(), "hold", json.RawMessage(params))
			if err != nil || string(got) != params {
				errs <- fmt.Errorf("call %d = %s, %v", i, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := srv.conns.Load(); c != 1 {
		t.Errorf("%d connections; want 1", c)
	}
}

func TestWSTransportConnectionLoss(t *testing.T) {
	tpNoLeaks(t)
	srv := tpNewWSServer(t, 4096)
	tr := tpNewWS(t, srv.url(), 1024)

	tests := []struct {
		name      string
		method    string
		wantIs    []error
		wantConns int64
	}{
		// A call pending on the connection fails with it, at once.
		{name: "remote hangs up", method: "drop", wantIs: []error{ErrTransport}, wantConns: 1},
		// The next call redials.
		{name: "oversize with id last", method: "bigidlast", wantIs: []error{ErrTransport}, wantConns: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bystander := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _, err := tr.Call(ctx, "never", nil)
				bystander <- err
			}()
			if m := <-srv.received; m != "never" {
				t.Fatalf("server got %q first", m)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _, err := tr.Call(ctx, tt.method, nil)
			<-srv.received
			for _, want := range tt.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("err = %v; want %v", err, want)
				}
			}
			if err := <-bystander; !errors.Is(err, ErrTransport) {
				t.Errorf("pending call err = %v; want ErrTransport", err)
			}
			if n := srv.conns.Load(); n != tt.wantConns {
				t.Errorf("%d connections; want %d", n, tt.wantConns)
			}
		})
	}

	got, _, err := tr.Call(context.Background(), "echo", json.RawMessage(`[7]`))
	if err != nil || string(got) != `[7]` {
		t.Fatalf("call after redial = %s, %v", got, err)
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections; want 3", n)
	}
}

func TestWSTransportDialFails(t *testing.T) {
	tpNoLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "ws://" + ln.Addr().String()
	ln.Close()
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no key "+r.URL.String(), http.StatusForbidden)
	}))
	defer forbidden.Close()

	tests := []struct {
		name string
		give string
	}{
		{"refused", refused},
		{"handshake refused", "ws" + strings.TrimPrefix(forbidden.URL, "http")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tpNewWS(t, tpSecretURL(tt.give), 0)
			// Concurrent callers share the failed dial and fail fast.
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Go(func() {
					_, _, err := tr.Call(context.Background(), "echo", nil)
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, ErrTransport) {
					t.Errorf("err = %v; want ErrTransport", err)
					continue
				}
				tpAssertNoSecret(t, err.Error())
			}
		})
	}
}

func TestWSTransportContext(t *testing.T) {
	tpNoLeaks(t)
	srv := tpNewWSServer(t, 0)
	tr := tpNewWS(t, srv.url(), 0)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := tr.Call(ctx, "never", nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTransport) {
		t.Fatalf("err = %v; want DeadlineExceeded, not ErrTransport", err)
	}
	// One caller's deadline must not cost the others the connection.
	got, _, err := tr.Call(context.Background(), "echo", json.RawMessage(`[1]`))
	if err != nil || string(got) != `[1]` {
		t.Fatalf("call after a timeout = %s, %v", got, err)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections; want 1", n)
	}
}

func TestWSTransportClose(t *testing.T) {
	tpNoLeaks(t)
	srv := tpNewWSServer(t, 0)
	tr := tpNewWS(t, srv.url(), 0)

	pending := make(chan error, 1)
	go func() {
		_, _, err := tr.Call(context.Background(), "never", nil)
		pending <- err
	}()
	<-srv.received
	tr.Close()
	if err := <-pending; !errors.Is(err, ErrTransport) {
		t.Errorf("pending call err = %v; want ErrTransport", err)
	}
	if _, _, err := tr.Call(context.Background(), "echo", nil); !errors.Is(err, ErrTransport) {
		t.Errorf("call after close err = %v; want ErrTransport", err)
	}
}

// ---- benchmarks ----

// tpRawServer is a minimal keep-alive HTTP/1.1 JSON-RPC server that hardly
// allocates, so that allocs/op measure the Transport, not the server.
func tpRawServer(b *testing.B, result string) (url string, stop func()) {
	addr, stop := testkit.ServeTCP(b, func(c net.Conn) { tpServeRaw(c, result) })
	return "http://" + addr, stop
}

func tpServeRaw(c net.Conn, result string) {
	defer c.Close()
	br := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	var body, out, head []byte
	for {
		var ok bool
		if body, ok = readRawRequest(br, body); !ok {
			return
		}
		out = appendRawReply(out[:0], body, result)
		head = append(head[:0], "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "...)
		head = strconv.AppendInt(head, int64(len(out)), 10)
		head = append(head, "\r\n\r\n"...)
		bw.Write(head)
		bw.Write(out)
		if bw.Flush() != nil {
			return
		}
	}
}

func BenchmarkHTTPTransportCall(b *testing.B) {
	for _, bb := range []struct {
		name   string
		result string
	}{
		{"small", `"0x1234567"`},
		{"4KiB", `"0x` + strings.Repeat("ab", 2048) + `"`},
	} {
		b.Run(bb.name, func(b *testing.B) {
			url, stop := tpRawServer(b, bb.result)
			defer stop()
			tr, err := New(Options{Name: "bench", URL: url})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			params := json.RawMessage(`["0x5b38da6a701c568545dcfcb03fcb875f56beddc4","latest"]`)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := tr.Call(context.Background(), "eth_getBalance", params); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkParseEnvelope(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":42,"result":{"transactions":[`)
	for i := range 200 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"hash":"0x%064x","input":"0x%s","value":"0x%x","to":null}`, i, strings.Repeat("de", 200), i*1000)
	}
	sb.WriteString(`]}}`)
	msg := []byte(sb.String())
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseEnvelope(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// A provider key in a subdomain must not survive into errors: DNS failures
// quote the host verbatim.
func TestRedactorHidesHostKey(t *testing.T) {
	raw := "https://SUBDOMAINKEY789.provider.example/v3/SECRETPATHKEY123"
	opts := Options{Name: "alpha", URL: raw}
	u, err := opts.normalize()
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("dial tcp: lookup SUBDOMAINKEY789.provider.example: no such host")
	_ = u
	failed := transportFailure("alpha", opts.Redactor(), "post", cause)
	got := failed.Error()
	if strings.Contains(got, "SUBDOMAINKEY789") {
		t.Fatalf("host key leaked: %q", got)
	}
	if !strings.Contains(got, "remote alpha") || !errors.Is(failed, ErrTransport) {
		t.Fatalf("error lost its remote name or class: %q", got)
	}
}

// A remote that echoes its own URL in an error must not hand the key to
// clients: the error's message and data are redacted.
func TestUpstreamErrorTextRedacted(t *testing.T) {
	tr, _ := tpNewHTTP(t, Options{}, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		echo := r.URL.Path + "?" + r.URL.RawQuery
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"bad key %s","data":{"url":%q}}}`, req.ID, echo, echo)
	})
	_, _, err := tr.Call(context.Background(), "eth_blockNumber", nil)
	var ue *UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want an UpstreamError", err)
	}
	tpAssertNoSecret(t, ue.Err.Message)
	tpAssertNoSecret(t, string(ue.Err.Data))
	if !strings.HasPrefix(ue.Err.Message, "bad key ") || ue.Err.Code != -32000 {
		t.Fatalf("error lost its meaning: %+v", ue.Err)
	}
}

// A bare host name carries no key: redacting it would mangle node errors.
func TestRedactorKeepsBareHosts(t *testing.T) {
	for _, raw := range []string{"http://node:8545", "http://127.0.0.1:8545", "http://[::1]:8545"} {
		opts := Options{Name: "alpha", URL: raw}
		u, err := opts.normalize()
		if err != nil {
			t.Fatal(err)
		}
		const msg = "missing trie node 0xab (path ) state 127 is not available"
		_ = u
		if got := opts.Redactor().Redact(msg); got != msg {
			t.Errorf("%s: %q became %q", raw, msg, got)
		}
	}
}

// readRawRequest reads one HTTP/1.1 request with a Content-Length from br,
// its body into body's storage; ok false when the connection ends or the
// request has no length.
func readRawRequest(br *bufio.Reader, body []byte) ([]byte, bool) {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return body, false
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 15 && bytes.EqualFold(line[:15], []byte("content-length:")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
		}
	}
	if n < 0 {
		return body, false
	}
	body = append(body[:0], make([]byte, n)...)
	_, err := io.ReadFull(br, body)
	return body, err == nil
}

// appendRawReply appends the JSON-RPC reply with result to the request
// body asked.
func appendRawReply(out, body []byte, result string) []byte {
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, scanID(body)...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	return append(out, '}')
}
