package cache

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func indexKey(i int) Key {
	var k Key
	binary.BigEndian.PutUint64(k[:], uint64(i))
	return k
}

// TestRecentIndexForgetsExpiredKeys: the index keeps a near-head key only
// while its entry may still be stored (recent_ttl): a head that stops
// moving, or a settled line far below it, no longer makes it hold every
// miss's key until its block settles. A reorg still evicts every key whose
// entry may be alive.
func TestRecentIndexForgetsExpiredKeys(t *testing.T) {
	const ttl = 4 * time.Second
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	x := newRecentIndex(ttl, clk.now)
	const perStep = 1000
	// Ten ttl of misses on one head block, one step a second.
	for step := range 40 {
		for i := range perStep {
			x.add(hashA, 0x65, indexKey(step*perStep+i))
		}
		clk.t = clk.t.Add(time.Second)
	}
	// The entries alive are those of the last ttl (4 steps); the index may
	// keep 1.25 ttl of keys, and the step on its edge.
	if got, most := x.size(), 4*perStep+2*perStep; got > most {
		t.Fatalf("index holds %d keys after 40 s of misses on one block, want at most %d (recent_ttl %v)", got, most, ttl)
	}
	// A block no longer asked for is forgotten whole.
	x.add(hashB, 0x66, indexKey(-1))
	clk.t = clk.t.Add(2 * ttl)
	x.add(hashB, 0x66, indexKey(-2))
	x.mu.Lock()
	_, kept := x.blocks[hashA]
	x.mu.Unlock()
	if kept {
		t.Error("a block without a key for 2 × recent_ttl is still indexed")
	}

	// Every key added less than ttl before a reorg of its block is
	// evicted.
	clk.t = clk.t.Add(time.Hour)
	added := map[Key]time.Time{}
	for i := range 3 * perStep {
		x.add(hashA, 0x65, indexKey(i))
		added[indexKey(i)] = clk.t
		if i%perStep == 0 {
			clk.t = clk.t.Add(ttl / 3)
		}
	}
	got := map[Key]bool{}
	for _, k := range x.orphans(newView(100, map[uint64]string{0x65: hashB, 0x66: hashB})) {
		got[k] = true
	}
	alive := 0
	for k, at := range added {
		if clk.t.Sub(at) < ttl {
			alive++
			if !got[k] {
				t.Fatalf("a key added %v before the reorg (recent_ttl %v) was not evicted", clk.t.Sub(at), ttl)
			}
		}
	}
	if alive < 2*perStep {
		t.Fatalf("only %d keys alive at the reorg: the test does not test", alive)
	}
}

// TestMemoryKeepsEveryField: an entry read from the memory tier is the
// entry stored, every field of it (the tier packs them: a field added to
// Entry must be packed too), its TTL kept to the millisecond, a TTL too
// long for the packing kept until evicted.
func TestMemoryKeepsEveryField(t *testing.T) {
	if n := reflect.TypeFor[Entry]().NumField(); n != memEntryFields+memUnpackedFields {
		t.Fatalf("Entry has %d fields, the memory tier packs %d: pack the new one in memEntry", n, memEntryFields)
	}
	if n := unsafe.Sizeof(memEntry{}); n != 40 {
		t.Fatalf("memEntry is %d bytes: past 40, otter's node leaves its 128-byte size class", n)
	}
	m := NewMemory(1<<20, nil)
	defer m.Close()
	tests := []struct {
		give Entry
		ttl  time.Duration
	}{
		{Entry{Value: []byte(`"0x1"`), Method: "eth_getBalance", Block: 7, Settled: true, Remote: "a"}, 0},
		{Entry{Value: []byte(`{"code":3}`), Method: "eth_call", Block: 1 << 40, Error: true, Remote: "a,b"}, time.Minute},
		{Entry{Value: []byte(`"0x2"`), Method: "eth_call", Error: true, Settled: true}, 400 * 24 * time.Hour},
		{Entry{Value: []byte(`"0x3"`), Method: "debug_traceCall"}, time.Minute + time.Microsecond},
	}
	for i, tt := range tests {
		k := indexKey(i)
		if err := m.Set(t.Context(), k, tt.give, tt.ttl); err != nil {
			t.Fatal(err)
		}
		got, ok, err := m.Get(t.Context(), k)
		if err != nil || !ok || !reflect.DeepEqual(got, tt.give) {
			t.Errorf("entry %d: got %+v %v %v, want %+v", i, got, ok, err, tt.give)
		}
	}
}
