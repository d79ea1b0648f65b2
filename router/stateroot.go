package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/integrity"
)

// maxStateRoots bounds the blocks' state roots a router remembers for the
// response cache's proof check: 4096 blocks, about 600 kB.
const maxStateRoots = 4096

// stateRoots are blocks' state roots by hash (lowercase), each read once
// from a header whose hash was checked: a block's root never changes.
type stateRoots struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *stateRoots) get(hash string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[hash]
	return r, ok
}

func (s *stateRoots) put(hash, root string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxStateRoots {
		s.m = make(map[string]string) // a sweep of old blocks starts over
	}
	s.m[hash] = root
}

var _ cache.Prover = cacheView{}

// StateRoot is the state root of the block with hash as the cluster holds
// it: the head window's block, the history store's, or one header lookup
// from the remotes, remembered. The root is taken only from a block that
// is the one asked for and whose header hashes to its hash; a block from
// the remotes must prove that (integrity's block_hash check run here,
// whatever the pool's checks), one the window or the store holds may only
// not contradict it (an L2's header go-ethereum cannot rebuild).
func (v cacheView) StateRoot(ctx context.Context, hash string) (string, bool) {
	rt := v.rt
	hash = strings.ToLower(hash)
	if r, ok := rt.roots.get(hash); ok {
		return r, true
	}
	c := evm.ParseCall("eth_getBlockByHash", json.RawMessage(`["`+hash+`",false]`))
	if rt.head != nil {
		if res, ok := rt.head.Answer(c); ok && rt.noteRoot(res, hash, true) {
			return rt.roots.get(hash)
		}
	}
	if rt.history != nil {
		if res, ok, err := rt.history.Answer(ctx, c); err == nil && ok && rt.noteRoot(res, hash, true) {
			return rt.roots.get(hash)
		}
	}
	if res, err := rt.forward(ctx, &c); err == nil && rt.noteRoot(res, hash, false) {
		return rt.roots.get(hash)
	}
	return "", false
}

// Proof is the remotes' answer to eth_getProof with params.
func (v cacheView) Proof(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	c := evm.ParseCall("eth_getProof", params)
	return v.rt.forward(ctx, &c)
}

// noteRoot remembers the state root of block raw, an answer for the block
// with hash: true when it is that block, and its header's hash is
// reproduced (or, held: the cluster's own block, not contradicted).
func (rt *Router) noteRoot(raw json.RawMessage, hash string, held bool) bool {
	v := integrity.VerifyBlock(raw, evm.BlockRef{Kind: evm.RefHash, Hash: hash})
	if !v.Passed.Has(integrity.CheckBlockRef) || len(v.Failed) > 0 {
		return false
	}
	if !held && !v.Passed.Has(integrity.CheckBlockHash) {
		return false
	}
	var b struct {
		StateRoot string `json:"stateRoot"`
	}
	if json.Unmarshal(raw, &b) != nil || len(b.StateRoot) != evm.HashLen {
		return false
	}
	rt.roots.put(hash, strings.ToLower(b.StateRoot))
	return true
}
