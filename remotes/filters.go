package remotes

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// Filters live on one remote: the id eth_newFilter returns means nothing to
// the others. The pool remembers which remote made each filter.
const (
	filterTTL        = 5 * time.Minute // geth drops idle filters after 5 minutes
	maxFiltersPooled = 100_000
)

type filterEntry struct {
	r       *Remote
	expires time.Time
}

type filterTable struct {
	mu        sync.Mutex
	m         map[string]filterEntry
	lastSweep time.Time
}

func newFilterTable() *filterTable { return &filterTable{m: make(map[string]filterEntry)} }

func (t *filterTable) put(id string, r *Remote, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= maxFiltersPooled {
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
		if len(t.m) >= maxFiltersPooled {
			return // the remote's filter still works; it just is not sticky
		}
	}
	t.m[id] = filterEntry{r: r, expires: now.Add(filterTTL)}
}

func (t *filterTable) remove(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

func (t *filterTable) get(id string, now time.Time) *Remote {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[id]
	if !ok || now.After(e.expires) {
		delete(t.m, id)
		return nil
	}
	e.expires = now.Add(filterTTL)
	t.m[id] = e
	return e.r
}

// pinned is the pinned strategy of the filter methods: creation goes to
// one remote (not retried once sent), and every later call on that filter
// goes back to it.
func (p *Pool) pinned(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case "eth_newFilter", "eth_newBlockFilter", "eth_newPendingTransactionFilter":
		r, _ := p.pick(method, route{}, 0)
		if r == nil {
			return nil, p.exhausted(ctx, method, 0, nil)
		}
		res, err := p.send(ctx, method, params, route{once: true, only: r})
		if err == nil {
			if id, uerr := strconv.Unquote(string(res)); uerr == nil {
				p.filters.put(id, r, p.now())
			}
		}
		return res, err
	case "eth_getFilterChanges", "eth_getFilterLogs", "eth_uninstallFilter":
		var id string
		if err := json.Unmarshal(evm.Param(params, 0), &id); err == nil {
			if r := p.filters.get(id, p.now()); r != nil {
				res, err := p.send(ctx, method, params, route{once: true, only: r})
				if err == nil && method == "eth_uninstallFilter" {
					p.filters.remove(id)
				}
				return res, err
			}
		}
	}
	return p.send(ctx, method, params, route{once: true})
}
