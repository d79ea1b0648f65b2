package cache

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/evm"
)

// View is the chain as the cache resolves a call's block against it: the
// router's settled line and its head window, which must say nothing
// (ok false) while it may be stale.
type View interface {
	// Settled is the cluster's settled line; ok is false while unknown.
	Settled() (n uint64, ok bool)
	// CanonicalHash is the hash of canonical block n in the head window.
	CanonicalHash(n uint64) (hash string, ok bool)
	// CanonicalNumber is the number of the canonical block with hash
	// (lowercase) in the head window.
	CanonicalNumber(hash string) (n uint64, ok bool)
	// SettledHash is the hash (lowercase) of settled block n as the
	// cluster knows it (the head window, the history store, or one
	// header lookup); ok is false when it cannot say.
	SettledHash(ctx context.Context, n uint64) (hash string, ok bool)
}

// pin is the block a key is fixed to.
type pin struct {
	// settled: by hash, or at or below the settled line: never changes.
	settled bool
	// recent: a number above the settled line, keyed by hash, the
	// canonical block's there when the key was made; or an EIP-1898 hash
	// with requireCanonical, while the window holds it canonical.
	recent bool
	// byHash: the call names the block by hash itself, and is sent as it
	// came.
	byHash bool
	number uint64 // 0 for by-hash keys, but requireCanonical ones
	hash   string // by hash, and recent keys: lowercase
}

// pinned is the hash a fetch must pin the call to: a recent number's
// block (a settled number's answer is the same on every branch, and a
// call by hash is pinned already).
func (p pin) pinned() string {
	if p.recent && !p.byHash {
		return p.hash
	}
	return ""
}

// keyVersion starts every key's digest: a change to the canonical form
// changes it, so that old entries are never read with a new meaning.
const keyVersion = "venn/cache/1"

// canonBufs hold the canonical params a key is digested from while it is
// made: a hit's call allocates nothing for its key (the writers recurse,
// so a buffer on the stack would escape anyway).
var canonBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// maxPooledCanon is the largest buffer kept for the next key: a huge
// eth_call's params are not held for ever.
const maxPooledCanon = 64 << 10

func putCanonBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledCanon {
		*bp = (*bp)[:0]
		canonBufs.Put(bp)
	}
}

// deriveKey is the key of c on chain, with its block resolved against v;
// ok is false when c's answer is not fixed by its block (pending,
// earliest, a tag the router did not pin, no block, a number the window
// does not know) or its params have no canonical form. Trace methods are
// keyed only by hash or settled.
func deriveKey(chain string, c *evm.Call, v View) (Key, pin, bool) {
	bp := canonBufs.Get().(*[]byte)
	defer putCanonBuf(bp)
	canon, ok := c.AppendCanonical((*bp)[:0])
	if !ok {
		return Key{}, pin{}, false
	}
	*bp = canon.Params
	var p pin
	b := canon.Block
	switch b.Kind {
	case evm.RefHash:
		p = pin{settled: true, byHash: true, hash: b.Hash}
		if canon.RequireCanonical {
			// Its answer holds only while the block is canonical (geth
			// refuses it after: "not currently canonical"): keyed while
			// the window holds the block canonical, near the head as a
			// recent number is (a reorg evicts it), never below the
			// window, where the cache cannot tell.
			n, ok := v.CanonicalNumber(b.Hash)
			if !ok || isTrace(c.Method) {
				return Key{}, pin{}, false
			}
			p.number = n
			if line, ok := v.Settled(); !ok || n > line {
				p.settled, p.recent = false, true
			}
		}
	case evm.RefNumber:
		if line, ok := v.Settled(); ok && b.Number <= line {
			p = pin{settled: true, number: b.Number}
			break
		}
		if isTrace(c.Method) {
			return Key{}, pin{}, false
		}
		hash, ok := v.CanonicalHash(b.Number)
		if !ok || hash == "" {
			return Key{}, pin{}, false
		}
		p = pin{recent: true, number: b.Number, hash: hash}
	default:
		return Key{}, pin{}, false
	}
	// On the stack for the params of a typical call.
	var keyBuf [512]byte
	buf := append(keyBuf[:0], keyVersion...)
	buf = append(append(append(buf, 0), chain...), 0)
	buf = append(append(buf, c.Method...), 0)
	// A recent number and its block's hash share a key: the same state.
	switch {
	case p.hash != "":
		buf = append(append(buf, 'h'), p.hash...)
		if canon.RequireCanonical {
			buf = append(buf, '!')
		}
	default:
		buf = strconv.AppendUint(append(buf, 'n'), p.number, 10)
	}
	buf = append(append(buf, 0), canon.Params...)
	return sha256.Sum256(buf), p, true
}

// isTrace reports the trace methods: cached by hash or settled only.
func isTrace(method string) bool {
	return strings.HasPrefix(method, "debug_trace") || strings.HasPrefix(method, "trace_")
}
