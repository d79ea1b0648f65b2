package subcenter

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// addrFilter is a logs subscription's params naming n addresses, from
// first on.
func addrFilter(first, n int) string {
	var b strings.Builder
	b.WriteString(`["logs",{"address":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"0x%040x"`, first+i)
	}
	b.WriteString(`]}]`)
	return b.String()
}

// topicFilter names n alternatives at topic position 1.
func topicFilter(n int) string {
	var b strings.Builder
	b.WriteString(`["logs",{"topics":[null,[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"0x%064x"`, i)
	}
	b.WriteString(`]]}]`)
	return b.String()
}

func TestFilterLimits(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	tests := []struct {
		name   string
		opts   Options
		give   string
		code   int    // 0: subscribes
		msg    string // in the error
		filter string // a second subscription on the same connection; "" none
	}{
		{name: "addresses at the default", give: addrFilter(1, 1000)},
		{name: "addresses over the default", give: addrFilter(1, 1001), code: -32052,
			msg: "exceed max addresses or topics per search position: 1001 addresses, limits.max_filter_addresses is 1000"},
		{name: "addresses over a configured limit", opts: Options{MaxAddresses: 2}, give: addrFilter(1, 3), code: -32052,
			msg: "limits.max_filter_addresses is 2"},
		{name: "one address is one", opts: Options{MaxAddresses: 1}, give: `["logs",{"address":"` + addr(1) + `"}]`},
		{name: "topics at the default", give: topicFilter(1000)},
		{name: "topics over the default", give: topicFilter(1001), code: -32052,
			msg: "exceed max addresses or topics per search position: 1001 topics at position 1, limits.max_filter_topics is 1000"},
		{name: "topics over a configured limit", opts: Options{MaxTopics: 5000}, give: topicFilter(4000)},
		{name: "five topic positions are geth's error", give: `["logs",{"topics":[null,null,null,null,null]}]`, code: -32602,
			msg: "invalid argument 1: exceed max topics"},
		{name: "filters on one connection over the limit", opts: Options{MaxFilterBytes: 80_000},
			give: addrFilter(1, 1000), filter: addrFilter(5000, 1000), code: -32052,
			msg: "max_filter_bytes_per_connection (80000) reached"},
		{name: "filters on one connection under the limit", opts: Options{MaxFilterBytes: 100_000},
			give: addrFilter(1, 1000), filter: addrFilter(5000, 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New("test", f.w, nil, tt.opts, nil, nil)
			t.Cleanup(c.Stop)
			n := newNotifier()
			params := tt.give
			if tt.filter != "" {
				subscribe(t, c, n, tt.give)
				params = tt.filter
			}
			_, err := c.Subscribe(ctxFor(n), []byte(params))
			switch {
			case tt.code == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.code != 0 && !isRPCError(err, tt.code, tt.msg):
				t.Fatalf("error %v, want %d %q", err, tt.code, tt.msg)
			}
		})
	}
}

// TestFiltersOfAClosedConnectionAreReleased: a connection's filters count
// against its budget until unsubscribed, and every trace of them, the
// address index's table included, goes when the connection closes.
func TestFiltersOfAClosedConnectionAreReleased(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	one := int64(len(addrFilter(1, 1000)[len(`["logs",`) : len(addrFilter(1, 1000))-1]))
	c := startCenter(t, f, Options{MaxFilterBytes: 10 * one})
	n := newNotifier()
	var ids []string
	for i := range 10 {
		ids = append(ids, subscribe(t, c, n, addrFilter(1+1000*i, 1000)))
	}
	if _, err := c.Subscribe(ctxFor(n), []byte(addrFilter(20_000, 1))); !isRPCError(err, -32052, "max_filter_bytes_per_connection") {
		t.Fatalf("an eleventh filter on a full connection: %v", err)
	}
	if _, err := c.Unsubscribe(ctxFor(n), []byte(`["`+ids[0]+`"]`)); err != nil {
		t.Fatal(err)
	}
	ids[0] = subscribe(t, c, n, addrFilter(20_000, 1000)) // unsubscribing gave the bytes back
	held := func() (conns, subs, addrs, peak int, bytes float64) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.conns), c.logs.n, len(c.logs.byAddr), c.logs.peak, testutil.ToFloat64(c.m.filterBytes)
	}
	if _, subs, addrs, _, bytes := held(); subs != 10 || addrs != 10_000 || bytes != float64(10*one) {
		t.Fatalf("held: %d filters, %d addresses, %v bytes; want 10, 10000, %d", subs, addrs, bytes, 10*one)
	}

	n.Disconnect(1000, "bye")
	deadline := time.Now().Add(5 * time.Second)
	for {
		conns, subs, addrs, peak, bytes := held()
		if conns == 0 && subs == 0 && addrs == 0 && bytes == 0 && peak < indexShrinkMin {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the connection closed: %d connections, %d filters, %d addresses (a table made for %d), %v bytes",
				conns, subs, addrs, peak, bytes)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkLogsFilterMemory is what one connection's filter of 1,000
// addresses holds while it is open, and what is left once it closed, per
// address.
func BenchmarkLogsFilterMemory(b *testing.B) {
	t := &testing.T{}
	f := &feed{t: t, w: newFeed(t, 16).w}
	f.extend("a", 1, 1, "a")
	c := New("test", f.w, nil, Options{MaxFilterBytes: 1 << 40}, nil, nil)
	t.Cleanup(c.Stop)
	const addrs = 1000
	params := make([]string, 100)
	for i := range params {
		params[i] = addrFilter(1+addrs*i, addrs)
	}
	var held, left float64
	for b.Loop() {
		var m0, m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		n := newNotifier()
		for _, p := range params {
			if _, err := c.Subscribe(ctxFor(n), []byte(p)); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		c.mu.Lock()
		c.dropLocked(c.conns[n])
		c.mu.Unlock()
		runtime.GC()
		runtime.ReadMemStats(&m2)
		held += float64(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
		left += float64(int64(m2.HeapAlloc) - int64(m0.HeapAlloc))
	}
	total := float64(b.N * len(params) * addrs)
	b.ReportMetric(held/total, "held-B/address")
	b.ReportMetric(left/total, "left-B/address")
}

// SetLimits applies to a running Center: the next subscription goes by
// the new max_subscriptions_per_connection and filter limits, and the
// ones open stay.
func TestSetLimits(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	c := New("test", f.w, nil, Options{MaxPerConn: 1}, nil, nil)
	t.Cleanup(c.Stop)
	n := newNotifier()
	subscribe(t, c, n, `["newHeads"]`)
	if _, err := c.Subscribe(ctxFor(n), []byte(`["newHeads"]`)); !isRPCError(err, -32052, "max_subscriptions_per_connection (1)") {
		t.Fatalf("a second subscription at 1: %v", err)
	}
	c.SetLimits(Options{MaxPerConn: 3, MaxAddresses: 2})
	subscribe(t, c, n, `["newHeads"]`)
	if _, err := c.Subscribe(ctxFor(n), []byte(addrFilter(1, 3))); !isRPCError(err, -32052, "limits.max_filter_addresses is 2") {
		t.Fatalf("3 addresses at max_filter_addresses 2: %v", err)
	}
	c.SetLimits(Options{MaxPerConn: 1})
	if _, err := c.Subscribe(ctxFor(n), []byte(`["newHeads"]`)); !isRPCError(err, -32052, "max_subscriptions_per_connection (1)") {
		t.Fatalf("after lowering to 1: %v", err)
	}
	c.mu.Lock()
	open := len(c.heads)
	c.mu.Unlock()
	if open != 2 {
		t.Errorf("%d subscriptions open after the limit was lowered, want both kept", open)
	}
}
