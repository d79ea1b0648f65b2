package cache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// realisticValue is the i-th answer of an indexer's state reads: most are
// one ABI word (eth_call of a getter, 68 bytes as JSON), some balances and
// nonces (a short quantity), one in twenty a contract's code (2 KiB).
func realisticValue(i int) []byte {
	switch {
	case i%20 == 0:
		return []byte(`"0x` + strings.Repeat("60", 1024) + `"`)
	case i%4 == 0:
		return []byte(`"0x1bc16d674ec80000"`)
	}
	return []byte(fmt.Sprintf(`"0x%064x"`, i))
}

// BenchmarkMemoryEntries reports what 100k realistic entries cost in the
// memory tier: heap bytes per entry, and the part of it that is not the
// value (what entryOverhead stands for).
func BenchmarkMemoryEntries(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		m := NewMemory(1<<40, nil)
		values := 0
		for i := range n {
			v := realisticValue(i)
			values += len(v)
			var k Key
			binary.BigEndian.PutUint64(k[:], uint64(i))
			k = sha256.Sum256(k[:])
			_ = m.Set(context.Background(), k, Entry{Value: v, Settled: true, Method: "eth_call", Block: uint64(i)}, 0)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		total := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(total/n, "bytes/entry")
		b.ReportMetric(float64(values)/n, "value-bytes/entry")
		b.ReportMetric((total-float64(values))/n, "overhead-bytes/entry")
		runtime.KeepAlive(m)
		m.Close()
		b.StartTimer()
	}
}

// BenchmarkServeHit is a hit's cost: the key (canonical params, sha256)
// and the memory tier's read, against the key alone.
func BenchmarkServeHit(b *testing.B) {
	get := call("eth_call", `[{"to":"`+testAddr+`","data":"0x70a08231000000000000000000000000`+testAddr[2:]+`"},"0x5"]`)
	v := newView(100, nil)
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, ok := deriveKey("dev", get, v); !ok {
				b.Fatal("no key")
			}
		}
	})
	b.Run("hit", func(b *testing.B) {
		c := New(testConfig(), Options{Chain: "dev"})
		defer c.Close()
		up := func(context.Context, string) (json.RawMessage, error) { return json.RawMessage(realisticValue(1)), nil }
		_, _, _ = c.Serve(context.Background(), get, v, false, up)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, _, o := c.Serve(context.Background(), get, v, false, up); o != Hit {
				b.Fatal(o)
			}
		}
	})
}
