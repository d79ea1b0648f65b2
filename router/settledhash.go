package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/evm"
)

// maxSettledHashes bounds the settled blocks' hashes a router remembers
// from header lookups: 4096 numbers, about 400 kB.
const maxSettledHashes = 4096

// settledHashes are the hashes of settled blocks the head window did not
// hold, each found by one header lookup: a settled block's hash never
// changes, so it is asked for once.
type settledHashes struct {
	mu sync.Mutex
	m  map[uint64]string
}

func (s *settledHashes) get(n uint64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.m[n]
	return h, ok
}

func (s *settledHashes) put(n uint64, h string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSettledHashes {
		s.m = make(map[uint64]string) // a sweep of old blocks starts over
	}
	s.m[n] = h
}

// settledHash is the hash of settled block n as the cluster knows it: the
// head window's, or one header lookup, remembered: from the history
// store, or else the remotes (the pool's accepted answer). The response
// cache pins a settled call's fetch to it (cache.View.SettledHash).
func (rt *Router) settledHash(ctx context.Context, n uint64) (string, bool) {
	if rt.canonical != nil {
		if h, ok := rt.canonical(n); ok && h != "" {
			return strings.ToLower(h), true
		}
	}
	if h, ok := rt.hashes.get(n); ok {
		return h, true
	}
	c := evm.ParseCall("eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`))
	var res json.RawMessage
	held := false
	if rt.history != nil && rt.settled(n) {
		if r, ok, err := rt.history.Answer(ctx, c); err == nil && ok {
			res, held = r, true
		}
	}
	if res == nil {
		r, err := rt.forward(ctx, &c)
		if err != nil {
			return "", false
		}
		res = r
	}
	var b struct{ Number, Hash string }
	if json.Unmarshal(res, &b) != nil || b.Number != evm.Quantity(n) || len(b.Hash) != evm.HashLen {
		return "", false
	}
	h := strings.ToLower(b.Hash)
	rt.hashes.put(n, h)
	// The proof check asks for this block's state root next: the header
	// at hand has it.
	rt.noteRoot(res, h, held)
	return h, true
}
