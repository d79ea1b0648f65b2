package wire

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// allocated is how many heap bytes the process allocated while f ran.
func allocated(f func()) int64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - before)
}

// writeRepeat writes n bytes of block, repeated, without allocating.
func writeRepeat(w io.Writer, block []byte, n int) error {
	for n > 0 {
		k, err := w.Write(block[:min(len(block), n)])
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// replyID reads the id of the call a fake remote got.
func replyID(r *http.Request) string {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	return string(req.ID)
}

// A reply is read in what its cap allows, whatever the remote sends: over
// the cap, inflated from a bomb, not JSON at all, or an error page; and a
// reply under the cap is copied once, not grown by doubling.
func TestHTTPTransportReadsBoundedMemory(t *testing.T) {
	tpNoLeaks(t)
	const mib = 1 << 20
	block := bytes.Repeat([]byte("ab"), mib/2)
	gz := func(parts ...[]byte) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		for _, p := range parts {
			zw.Write(p)
		}
		zw.Close()
		return b.Bytes()
	}
	// 256 gzip members of a MiB of zeros each: one stream of about 256 KB
	// that inflates to 256 MiB.
	bomb := bytes.Repeat(gz(bytes.Repeat([]byte("0"), mib)), 256)
	var emptyMembers []byte // 1.3 MiB of gzip members that inflate to nothing
	for empty := gz(); len(emptyMembers) < 2*mib; {
		emptyMembers = append(emptyMembers, empty...)
	}

	tests := []struct {
		name     string
		max      int64
		serve    func(w http.ResponseWriter, id string)
		want     string // the result's length, when the call succeeds
		wantErr  func(error) bool
		maxAlloc int64
	}{
		{
			name: "chunked reply over the cap stops at it", max: 8 * mib,
			serve: func(w http.ResponseWriter, id string) {
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":"0x`)
				writeRepeat(w, block, 64*mib)
			},
			wantErr: isTooLarge, maxAlloc: 12 * mib,
		},
		{
			name: "gzip bomb stops at the cap", max: 8 * mib,
			serve: func(w http.ResponseWriter, id string) {
				w.Header().Set("Content-Encoding", "gzip")
				w.Write(gz([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":"0x`)))
				w.Write(bomb)
			},
			wantErr: isTooLarge, maxAlloc: 12 * mib,
		},
		{
			name: "gzip wire bytes count against the cap too", max: mib,
			serve: func(w http.ResponseWriter, id string) {
				w.Header().Set("Content-Encoding", "gzip")
				w.Write(emptyMembers)
				w.Write(gz([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":"0x1"}`)))
			},
			wantErr: isTooLarge, maxAlloc: 4 * mib,
		},
		{
			name: "Content-Length over the cap: nothing is read", max: 8 * mib,
			serve: func(w http.ResponseWriter, id string) {
				w.Header().Set("Content-Length", strconv.Itoa(64*mib))
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":"0x`)
				writeRepeat(w, block, 64*mib-100)
			},
			wantErr: isTooLarge, maxAlloc: mib,
		},
		{
			name: "a 200 that is not JSON stops at its first bytes", max: DefaultMaxResponseBytes,
			serve: func(w http.ResponseWriter, id string) {
				io.WriteString(w, "\n  <html><body>")
				writeRepeat(w, block, 64*mib)
			},
			wantErr: func(err error) bool { return errors.Is(err, ErrBadReply) }, maxAlloc: 2 * mib,
		},
		{
			name: "a 200 with a Content-Length that is not JSON stops at its first bytes", max: 256 * mib, // the length within the cap
			serve: func(w http.ResponseWriter, id string) {
				w.Header().Set("Content-Length", strconv.Itoa(64*mib+6))
				io.WriteString(w, "<html>")
				writeRepeat(w, block, 64*mib)
			},
			wantErr: func(err error) bool { return errors.Is(err, ErrBadReply) }, maxAlloc: 2 * mib,
		},
		{
			name: "a gzip error page over the cap is its status", max: mib,
			serve: func(w http.ResponseWriter, id string) {
				w.Header().Set("Content-Encoding", "gzip")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write(emptyMembers)
			},
			wantErr: func(err error) bool {
				se, ok := errors.AsType[*HTTPStatusError](err)
				return ok && se.Status == http.StatusServiceUnavailable
			},
			maxAlloc: 4 * mib,
		},
		{
			name: "a huge error page is read only at its start", max: DefaultMaxResponseBytes,
			serve: func(w http.ResponseWriter, id string) {
				w.WriteHeader(http.StatusBadGateway)
				io.WriteString(w, "<html><body>")
				writeRepeat(w, block, 64*mib)
			},
			wantErr: func(err error) bool {
				se, ok := errors.AsType[*HTTPStatusError](err)
				return ok && se.Status == http.StatusBadGateway && strings.HasPrefix(se.Body, "<html><body>abab")
			},
			maxAlloc: 2 * mib,
		},
		{
			name: "a reply under the cap is copied once", max: 16 * mib,
			serve: func(w http.ResponseWriter, id string) {
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":"0x`)
				writeRepeat(w, block, 6*mib)
				io.WriteString(w, `"}`)
			},
			want: strconv.Itoa(6*mib + 4), maxAlloc: 15 * mib,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.serve(w, replyID(r))
			}))
			t.Cleanup(srv.Close)
			tr, err := New(Options{Name: "alpha", URL: srv.URL, MaxResponseBytes: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tr.Close)
			var (
				res     json.RawMessage
				callErr error
			)
			n := allocated(func() { res, _, callErr = tr.Call(context.Background(), "eth_huge", nil) })
			switch {
			case tt.want != "":
				if callErr != nil || strconv.Itoa(len(res)) != tt.want {
					t.Fatalf("call = %d bytes, %v; want %s bytes", len(res), callErr, tt.want)
				}
			case !tt.wantErr(callErr):
				t.Fatalf("err = %v", callErr)
			}
			if n > tt.maxAlloc {
				t.Errorf("the call allocated %d MiB, want at most %d MiB", n>>20, tt.maxAlloc>>20)
			}
		})
	}
}

func isTooLarge(err error) bool {
	_, ok := errors.AsType[*ReplyTooLargeError](err)
	return ok
}

// Over WebSocket too: an oversize message is read to its cap, the rest is
// thrown away as it comes, and the connection stays; a message that goes
// on without end closes the connection instead of being read forever.
func TestWSTransportReadsBoundedMemory(t *testing.T) {
	tpNoLeaks(t)
	const (
		mib = 1 << 20
		max = 4 * mib
	)
	block := bytes.Repeat([]byte("a"), mib)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var req tpRequest
			json.Unmarshal(data, &req)
			var p []int
			json.Unmarshal(req.Params, &p)
			mw, err := c.Writer(ctx, websocket.MessageText)
			if err != nil {
				return
			}
			io.WriteString(mw, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":"`)
			writeRepeat(mw, block, p[0])
			io.WriteString(mw, `"}`)
			if mw.Close() != nil {
				return
			}
		}
	}))
	t.Cleanup(func() {
		cancel()
		srv.Close()
		wg.Wait()
	})
	tr := tpNewWS(t, "ws"+strings.TrimPrefix(srv.URL, "http"), max)

	var err error
	n := allocated(func() {
		_, _, err = tr.Call(context.Background(), "eth_huge", json.RawMessage(`[`+strconv.Itoa(4*max)+`]`))
	})
	if !isTooLarge(err) {
		t.Fatalf("16 MiB message: err = %v; want a *ReplyTooLargeError", err)
	}
	if n > 2*max {
		t.Errorf("a 16 MiB message allocated %d MiB, want at most %d MiB", n>>20, 2*max>>20)
	}
	if got, _, err := tr.Call(context.Background(), "eth_small", json.RawMessage(`[3]`)); err != nil || string(got) != `"aaa"` {
		t.Fatalf("the connection did not survive: %s, %v", got, err)
	}
	// Past wsDiscardFactor caps, throwing away is not worth it.
	if _, _, err := tr.Call(context.Background(), "eth_huge", json.RawMessage(`[`+strconv.Itoa((wsDiscardFactor+2)*max)+`]`)); !errors.Is(err, ErrTransport) {
		t.Fatalf("endless message: err = %v; want ErrTransport (connection closed)", err)
	}
	if got, _, err := tr.Call(context.Background(), "eth_small", json.RawMessage(`[3]`)); err != nil || string(got) != `"aaa"` {
		t.Fatalf("no redial after the endless message: %s, %v", got, err)
	}
}

// The budget: replies wait for room while the process reads others, fail
// with ErrReplyBudget when it stays full, and give every byte back.
func TestReplyBudget(t *testing.T) {
	inUse := prometheus.NewGauge(prometheus.GaugeOpts{Name: "in_use"})
	exhausted := prometheus.NewCounter(prometheus.CounterOpts{Name: "exhausted"})
	b := NewReplyBudget(1000, inUse, exhausted)
	b.wait = 5 * time.Second
	ctx := context.Background()

	if err := b.take(ctx, 900); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.take(ctx, 200) }()
	waitFor(t, "a waiter", func() bool { return b.waiters.Load() == 1 })
	b.give(500) // 400 used: room for it
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if u := b.used.Load(); u != 600 {
		t.Fatalf("used %d, want 600", u)
	}

	b.wait = 20 * time.Millisecond
	if err := b.take(ctx, 500); !errors.Is(err, ErrReplyBudget) {
		t.Fatalf("over the budget: err = %v; want ErrReplyBudget", err)
	}
	if err := b.take(ctx, 1001); !errors.Is(err, ErrReplyBudget) {
		t.Fatalf("more than the whole budget: err = %v; want ErrReplyBudget", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.take(cctx, 500); !errors.Is(err, context.Canceled) {
		t.Fatalf("caller gone: err = %v; want its context's error", err)
	}
	b.give(600)
	if u := b.used.Load(); u != 0 {
		t.Fatalf("used %d after every give, want 0", u)
	}
	if v := testutil.ToFloat64(inUse); v != 0 {
		t.Errorf("reply_bytes_in_flight = %v, want 0", v)
	}
	if v := testutil.ToFloat64(exhausted); v != 2 {
		t.Errorf("reply_budget_exhausted_total = %v, want 2", v)
	}
}

// Through a transport: while other replies hold the budget, a big reply is
// refused as venn's overload (the remote is not at fault) and a small one
// still passes; once they are done, the big one is read, and the Transport
// gives back all it took.
func TestHTTPTransportReplyBudget(t *testing.T) {
	tpNoLeaks(t)
	const mib = 1 << 20
	block := bytes.Repeat([]byte("ab"), mib/2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := replyID(r)
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":"0x`)
		writeRepeat(w, block, size)
		io.WriteString(w, `"}`)
	}))
	t.Cleanup(srv.Close)
	b := NewReplyBudget(8*mib, nil, nil)
	b.wait = 50 * time.Millisecond
	open := func(size int) Transport {
		tr, err := New(Options{Name: "alpha", URL: srv.URL + "/?size=" + strconv.Itoa(size), Budget: b})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	big, small := open(4*mib), open(1000)
	ctx := context.Background()

	if err := b.take(ctx, 6*mib); err != nil { // replies of other calls
		t.Fatal(err)
	}
	if _, _, err := big.Call(ctx, "eth_big", nil); !errors.Is(err, ErrReplyBudget) {
		t.Fatalf("big reply with the budget held: err = %v; want ErrReplyBudget", err)
	}
	if res, _, err := small.Call(ctx, "eth_small", nil); err != nil || len(res) != 1004 {
		t.Fatalf("small reply with the budget held: %d bytes, %v", len(res), err)
	}
	b.give(6 * mib)
	if res, _, err := big.Call(ctx, "eth_big", nil); err != nil || len(res) != 4*mib+4 {
		t.Fatalf("big reply with the budget free: %d bytes, %v", len(res), err)
	}
	if u := b.used.Load(); u != 0 {
		t.Errorf("%d bytes of budget not given back", u)
	}
}
