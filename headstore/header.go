package headstore

// Headers first. A newHeads subscriber needs a block's header, not its
// transactions, receipts or logs, so the leader announces each new header
// as soon as it is known good enough (its hash is its fields', and it
// extends the chain the leader published), beside the window's stream and
// before the block's bodies are checked and stored. Every replica's
// follower hands the headers it hears to its Window, which keeps them
// apart from the canonical blocks: they are never served as blocks. What
// the window serves stays whole: while a header is ahead of the window, a
// call for its number is not answered from the window (the router
// forwards it, as it does for any block the window lacks, rather than
// answer null), latest is still the window's head, and eth_blockNumber
// answers the announced number, so that a client that got the header and
// asks for the head's number, then the block by number, gets it. The
// subscription dispatcher
// (package subcenter) tells each header once, whether it came first or
// with its block; a header whose block never comes is replaced, like any
// block a reorg drops, by the block the window gets at its number.
//
// Announcements are best effort: a header lost on the way (a dropped
// pub/sub connection) only means its subscribers wait for the block.

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// Header is a block's header as the leader announces it ahead of the
// block.
type Header struct {
	Number uint64
	Hash   string
	Parent string
	// Raw is the block object as the remote sent it, less its body
	// (transactions, withdrawals): every member a newHeads notification
	// takes, byte for byte.
	Raw json.RawMessage
	// Epoch is the announcing leader's fencing epoch; Time when it
	// announced, in Unix nanoseconds.
	Epoch uint64
	Time  int64
}

// HeaderStore is a Store that carries headers ahead of their blocks. Both
// of venn's stores are.
type HeaderStore interface {
	// PublishHeader announces h, only if epoch is the chain's current
	// epoch (ErrFenced otherwise). It sets h.Epoch, and h.Time when zero.
	PublishHeader(ctx context.Context, epoch uint64, h *Header) error
	// FollowHeaders calls fn for every header announced from now on until
	// ctx ends (returning ctx.Err()) or the connection breaks. Headers
	// announced while nobody followed are not replayed.
	FollowHeaders(ctx context.Context, fn func(*Header)) error
}

// HeaderOf cuts the header out of a block object as eth_getBlockBy*
// answers it: the object without its transactions and withdrawals, each
// other member as sent. ok is false for anything but an object with a
// number, a hash and a parent hash.
func HeaderOf(block []byte) (h *Header, ok bool) {
	i := jsonscan.SkipSpace(block, 0)
	if i >= len(block) || block[i] != '{' {
		return nil, false
	}
	h = &Header{}
	raw := make([]byte, 0, 1536)
	raw = append(raw, '{')
	obj := jsonscan.Object{Data: block, I: i + 1}
	for {
		k, v, more := obj.Next()
		if !more {
			break
		}
		switch string(k) {
		case "transactions", "withdrawals":
			continue
		case "number":
			n, err := evm.ParseQuantity(unquoted(v))
			if err != nil {
				return nil, false
			}
			h.Number = n
		case "hash":
			h.Hash = unquoted(v)
		case "parentHash":
			h.Parent = unquoted(v)
		}
		if len(raw) > 1 {
			raw = append(raw, ',')
		}
		raw = append(raw, '"')
		raw = append(raw, k...)
		raw = append(raw, '"', ':')
		raw = append(raw, v...)
	}
	if h.Hash == "" || h.Parent == "" {
		return nil, false
	}
	h.Raw = append(raw, '}')
	return h, true
}

// unquoted is a JSON string's contents, "" for anything else or one with
// escapes (hashes and quantities have none).
func unquoted(v []byte) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return ""
	}
	s := v[1 : len(v)-1]
	if slices.Contains(s, '\\') {
		return ""
	}
	return string(s)
}

// Window side: the headers announced ahead of the window.

// maxAhead bounds the headers a window keeps ahead of its head.
const maxAhead = 16

// aheadFresh is how long an announced header holds the window's answers
// for its number back: longer than any block takes from its
// header to the window, short enough that a header whose block never
// comes (a reorg to a shorter chain) stops sending calls to the remotes.
const aheadFresh = 5 * time.Second

// Announce takes a header heard ahead of its block. One at or below the
// window's head is old news and dropped; so is one already held.
func (w *Window) Announce(h *Header) {
	if h == nil || h.Hash == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.canon); n > 0 && h.Number <= w.canon[n-1].Number {
		return
	}
	for _, a := range w.ahead {
		if a.Hash == h.Hash {
			return
		}
	}
	w.ahead = append(w.ahead, h)
	if len(w.ahead) > maxAhead {
		w.ahead = slices.Delete(w.ahead, 0, len(w.ahead)-maxAhead)
	}
	if h.Number > w.aheadTop.Load() {
		w.aheadTop.Store(h.Number)
	}
	w.aheadAt.Store(time.Now().UnixNano())
	close(w.announced)
	w.announced = make(chan struct{})
}

// Announced returns a channel closed when the next header is announced.
func (w *Window) Announced() <-chan struct{} {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.announced
}

// Ahead returns the headers announced above the window's head, lowest
// number first (in the order heard within a number). They are shared and
// must not be modified.
func (w *Window) Ahead() []*Header {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := slices.Clone(w.ahead)
	slices.SortStableFunc(out, func(a, b *Header) int {
		switch {
		case a.Number < b.Number:
			return -1
		case a.Number > b.Number:
			return 1
		}
		return 0
	})
	return out
}

// pruneAhead drops the announced headers the window reached; the caller
// holds mu.
func (w *Window) pruneAhead() {
	n := len(w.canon)
	if n == 0 || len(w.ahead) == 0 {
		return
	}
	head := w.canon[n-1].Number
	w.ahead = slices.DeleteFunc(w.ahead, func(h *Header) bool { return h.Number <= head })
	if len(w.ahead) == 0 {
		w.aheadTop.Store(0)
	}
}

// aheadOf is the highest announced number above head while it is fresh,
// else 0. It takes no lock.
func (w *Window) aheadOf(head uint64) uint64 {
	top := w.aheadTop.Load()
	if top <= head {
		return 0
	}
	if time.Since(time.Unix(0, w.aheadAt.Load())) > aheadFresh {
		return 0
	}
	return top
}
