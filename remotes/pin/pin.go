package pin

import (
	"sync"
	"time"
)

const (
	// TTL is how long an idle filter is remembered: geth drops idle
	// filters after 5 minutes.
	TTL = 5 * time.Minute
	// maxFilters bounds the table; past it a new filter still works on
	// its remote, it just is not sticky.
	maxFilters = 100_000
)

type entry[R any] struct {
	r       R
	expires time.Time
}

// Table remembers the remote (an R) that made each filter, by filter id.
// It is safe for concurrent use.
type Table[R any] struct {
	mu        sync.Mutex
	m         map[string]entry[R]
	lastSweep time.Time
}

// New is an empty table.
func New[R any]() *Table[R] { return &Table[R]{m: make(map[string]entry[R])} }

// Put remembers that r made filter id at now.
func (t *Table[R]) Put(id string, r R, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= maxFilters {
		// A full table of live filters is swept at most once a second:
		// each sweep walks every entry under the lock.
		if now.Sub(t.lastSweep) < time.Second {
			return
		}
		t.lastSweep = now
		for k, e := range t.m {
			if now.After(e.expires) {
				delete(t.m, k)
			}
		}
		if len(t.m) >= maxFilters {
			return // the remote's filter still works; it just is not sticky
		}
	}
	t.m[id] = entry[R]{r: r, expires: now.Add(TTL)}
}

// Remove forgets filter id (uninstalled).
func (t *Table[R]) Remove(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// Get is the remote that made filter id, unless it was idle past TTL at
// now; a use extends its life.
func (t *Table[R]) Get(id string, now time.Time) (R, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[id]
	if !ok || now.After(e.expires) {
		delete(t.m, id)
		var none R
		return none, false
	}
	e.expires = now.Add(TTL)
	t.m[id] = e
	return e.r, true
}
