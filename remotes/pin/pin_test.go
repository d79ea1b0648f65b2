package pin

import (
	"strconv"
	"testing"
	"time"
)

// Filter ids stick to the remote that made them, until uninstalled or idle
// past the TTL.
func TestTable(t *testing.T) {
	ft := New[string]()
	now := time.Now()
	ft.Put("0x1", "a", now)
	if r, ok := ft.Get("0x1", now.Add(TTL/2)); !ok || r != "a" {
		t.Fatal("a live filter lost its remote")
	}
	if r, _ := ft.Get("0x1", now.Add(TTL/2+TTL-time.Second)); r != "a" {
		t.Fatal("use did not extend the filter's life")
	}
	ft.Remove("0x1")
	if _, ok := ft.Get("0x1", now); ok {
		t.Fatal("an uninstalled filter is still routed")
	}
	ft.Put("0x2", "a", now)
	if _, ok := ft.Get("0x2", now.Add(TTL+time.Second)); ok {
		t.Fatal("an idle filter outlived its TTL")
	}
}

// A full table takes a new filter only once a sweep made room, and sweeps
// at most once a second.
func TestTableFull(t *testing.T) {
	ft := New[int]()
	now := time.Now()
	for i := range maxFilters {
		ft.Put(strconv.Itoa(i), i, now)
	}
	ft.Put("live", 1, now.Add(time.Second))
	if _, ok := ft.Get("live", now.Add(time.Second)); ok {
		t.Fatal("a full table of live filters took one more")
	}
	later := now.Add(TTL + 2*time.Second)
	ft.Put("new", 2, later)
	if r, ok := ft.Get("new", later); !ok || r != 2 {
		t.Fatal("a full table of idle filters was not swept")
	}
}
