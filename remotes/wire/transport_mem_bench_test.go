package wire

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/jrpc"
)

// heapPeak samples the heap's object bytes (live and not yet swept) until
// stop, and returns the highest figure seen. A big reply's buffers live for
// milliseconds at least, far longer than the sampling period.
type heapPeak struct {
	stop chan struct{}
	done chan uint64
}

func startHeapPeak() *heapPeak {
	runtime.GC()
	h := &heapPeak{stop: make(chan struct{}), done: make(chan uint64, 1)}
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) end() uint64 {
	close(h.stop)
	return <-h.done
}

// hugeServer answers every call with a reply of about size bytes written
// as it is made (chunked, no Content-Length), or, with bomb, a gzip reply
// of a few hundred KB that inflates to size: what a broken or hostile
// remote can send.
func hugeServer(tb testing.TB, size int, bomb bool) *httptest.Server {
	tb.Helper()
	const block = 1 << 20
	hex := bytes.Repeat([]byte("ab"), block/2)
	var zeros []byte // gzip members of a MiB of '0' each: size bytes inflated
	if bomb {
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
		zw.Write(bytes.Repeat([]byte("0"), block))
		zw.Close()
		zeros = bytes.Repeat(zb.Bytes(), size/block)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		head := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":"0x`
		if bomb {
			// Concatenated gzip members are one valid gzip stream.
			w.Header().Set("Content-Encoding", "gzip")
			first, last := gzipped(head), gzipped(`"}`)
			w.Header().Set("Content-Length", strconv.Itoa(len(first)+len(zeros)+len(last)))
			w.Write(first)
			w.Write(zeros)
			w.Write(last)
			return
		}
		io.WriteString(w, head)
		for n := 0; n < size; n += block {
			if _, err := w.Write(hex[:min(block, size-n)]); err != nil {
				return
			}
		}
		io.WriteString(w, `"}`)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// gzipped is s as one gzip member.
func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	io.WriteString(zw, s)
	zw.Close()
	return b.Bytes()
}

// BenchmarkHugeReplies measures the peak heap of upstream replies that are
// huge: four at once over the default 256 MiB cap, four at once under it,
// and one gzip bomb (300 KB on the wire, 300 MB inflated). Run it with
// -benchtime 1x: one round is hundreds of megabytes.
func BenchmarkHugeReplies(b *testing.B) {
	for _, bb := range []struct {
		name       string
		size, conc int
		bomb       bool
	}{
		{"4x300MB", 300 << 20, 4, false},
		{"4x200MB", 200 << 20, 4, false},
		{"gzip-bomb-300MB", 300 << 20, 1, true}, // 300 KB on the wire
	} {
		b.Run(bb.name, func(b *testing.B) {
			srv := hugeServer(b, bb.size, bb.bomb)
			// As NewPool builds it: the process's budget, at its default.
			tr, err := New(Options{Name: "bench", URL: srv.URL,
				Budget: NewReplyBudget(jrpc.MaxDefaultReplyBytesInFlight, nil, nil)})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			var (
				peak   uint64
				failed atomic.Int64 // calls that got no result
			)
			for b.Loop() {
				h := startHeapPeak()
				var wg sync.WaitGroup
				for range bb.conc {
					wg.Go(func() {
						res, _, err := tr.Call(context.Background(), "eth_huge", nil)
						if err == nil && len(res) < bb.size {
							b.Errorf("result of %d bytes", len(res))
						}
						if err != nil {
							failed.Add(1)
						}
					})
				}
				wg.Wait()
				peak = max(peak, h.end())
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(failed.Load())/float64(b.N*bb.conc), "failed/call")
		})
	}
}

// goMapped is the memory the Go runtime holds from the OS and has not
// returned: what RSS shows of it.
func goMapped() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// BenchmarkReplyMemory is issue 29's finding 9: four calls at once to a
// remote that streams 48 MB replies, with the reply budget and cap of
// each setting: "old-defaults" (1 GiB in flight, 256 MiB per reply),
// "limit-128MiB" (what a 128 MiB memory limit gives now: a quarter, 32
// MiB, in flight, so a reply is capped there), "limit-1GiB" (256 MiB in
// flight, the 64 MiB default cap: the replies are served). peak-heap is
// the most the heap held during the calls; held-after is what the runtime
// still held from the OS 3 s after them, idle. Run with -benchtime 1x.
func BenchmarkReplyMemory(b *testing.B) {
	const mib = 1 << 20
	srv := hugeServer(b, 48e6, false)
	for _, bb := range []struct {
		name        string
		budget, max int64
	}{
		{"old-defaults", 1 << 30, 256 * mib},
		{"limit-128MiB", 32 * mib, 64 * mib},
		{"limit-1GiB", 256 * mib, 64 * mib},
	} {
		b.Run(bb.name, func(b *testing.B) {
			tr, err := New(Options{Name: "bench", URL: srv.URL,
				MaxResponseBytes: bb.max, Budget: NewReplyBudget(bb.budget, nil, nil)})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			var (
				peak, held uint64
				failed     atomic.Int64
			)
			for b.Loop() {
				h := startHeapPeak()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						if _, _, err := tr.Call(context.Background(), "eth_huge", nil); err != nil {
							failed.Add(1)
						}
					})
				}
				wg.Wait()
				peak = max(peak, h.end())
				time.Sleep(3 * time.Second) // idle, as a replica is after a burst
				held = max(held, goMapped())
			}
			b.ReportMetric(float64(peak)/mib, "peak-heap-MiB")
			b.ReportMetric(float64(held)/mib, "held-after-MiB")
			b.ReportMetric(float64(failed.Load())/float64(4*b.N), "failed/call")
		})
	}
}
