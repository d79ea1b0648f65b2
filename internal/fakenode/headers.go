package fakenode

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// headerWatch counts the values of watched request headers over HTTP: what
// a provider would see of the headers a gateway forwards.
type headerWatch struct {
	names atomic.Pointer[[]string] // canonical; nil: none watched
	mu    sync.Mutex
	seen  map[string]map[string]int64 // name → value ("" for absent) → requests
}

// WatchHeaders starts counting, per value, the HTTP requests carrying each
// of names (and those without it, under ""); it forgets what was counted.
func (n *Node) WatchHeaders(names ...string) {
	canon := make([]string, len(names))
	for i, h := range names {
		canon[i] = http.CanonicalHeaderKey(h)
	}
	n.headers.mu.Lock()
	n.headers.seen = make(map[string]map[string]int64, len(canon))
	n.headers.mu.Unlock()
	n.headers.names.Store(&canon)
}

// HeaderValues is how many HTTP requests carried each value of header
// name since WatchHeaders; "" counts the requests without it.
func (n *Node) HeaderValues(name string) map[string]int64 {
	n.headers.mu.Lock()
	defer n.headers.mu.Unlock()
	out := make(map[string]int64)
	for v, c := range n.headers.seen[http.CanonicalHeaderKey(name)] {
		out[v] = c
	}
	return out
}

func (w *headerWatch) note(r *http.Request) {
	names := w.names.Load()
	if names == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range *names {
		m := w.seen[name]
		if m == nil {
			m = make(map[string]int64)
			w.seen[name] = m
		}
		m[r.Header.Get(name)]++
	}
}
