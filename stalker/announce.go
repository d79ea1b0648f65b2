package stalker

// Headers first (package headstore, header.go). A newHeads subscriber
// needs the header only, so the leader announces each new block's header
// the moment the block's answer is in, before its transactions are
// checked, before its receipts are in and checked, and before the block
// is stored: those are the window's, which still gets nothing unchecked.
// A header is announced when it is good enough for a subscriber:
//
//   - with Integrity, its hash is its fields' (integrity.VerifyBlock on
//     the header alone: the block's number, or hash, as asked, and its
//     hash; nothing failed), so a remote cannot announce a hash its
//     header does not have;
//   - it extends the chain: its parent is the published head, or the
//     header announced last;
//   - it was not announced before.
//
// A header announced whose block then fails its checks, or is replaced by
// a sibling before it is published, is followed by the block the leader
// does publish at its number, which every dispatcher tells as a new head
// at that height. Announcing never holds the fetch up: the header goes to
// a sender goroutine, and one that cannot keep up drops headers (their
// subscribers wait for the blocks).

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/integrity"
)

// announcer bounds.
const (
	// announceQueue is the headers waiting for the sender.
	announceQueue = 16
	// announcedKept is how many announced hashes are remembered, so that
	// none is announced twice (a hedged fetch checks two answers).
	announcedKept = 64
)

// announcer announces one leadership's headers ahead of their blocks.
type announcer struct {
	hs    headstore.HeaderStore
	epoch uint64
	log   *slog.Logger
	queue chan *headstore.Header

	mu   sync.Mutex
	base headstore.Ref // the published head when the fetch began
	last headstore.Ref // the header announced last
	sent []string      // hashes announced, newest last
}

func newAnnouncer(hs headstore.HeaderStore, epoch uint64, log *slog.Logger) *announcer {
	return &announcer{hs: hs, epoch: epoch, log: log, queue: make(chan *headstore.Header, announceQueue)}
}

// run sends the headers queued until ctx ends or the store fences the
// leadership.
func (a *announcer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-a.queue:
			err := a.hs.PublishHeader(ctx, a.epoch, h)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, headstore.ErrFenced):
				return // the stalker finds out at its next publish
			case err != nil:
				a.log.Debug("header not announced", "number", h.Number, "hash", h.Hash, "err", err)
			}
		}
	}
}

// from records the published head a fetch starts from.
func (a *announcer) from(top headstore.Ref) {
	a.mu.Lock()
	a.base = top
	a.mu.Unlock()
}

// offer announces h if it extends the chain and was not announced yet.
func (a *announcer) offer(h *headstore.Header) {
	a.mu.Lock()
	defer a.mu.Unlock()
	links := h.Number == a.base.Number+1 && h.Parent == a.base.Hash && a.base.Hash != "" ||
		h.Number == a.last.Number+1 && h.Parent == a.last.Hash && a.last.Hash != ""
	if !links || slices.Contains(a.sent, h.Hash) {
		return
	}
	select {
	case a.queue <- h:
	default:
		return // the sender is behind; the block will come
	}
	a.last = headstore.Ref{Number: h.Number, Hash: h.Hash}
	a.sent = append(a.sent, h.Hash)
	if len(a.sent) > announcedKept {
		a.sent = slices.Delete(a.sent, 0, len(a.sent)-announcedKept)
	}
}

// headerGood reports whether h, cut from a block's answer, is the block
// want names and hashes to its hash, as far as a header can say: nothing
// the header alone is checked for failed.
func headerGood(h *headstore.Header, want evm.BlockRef) bool {
	v := integrity.VerifyBlock(h.Raw, want)
	return v.Err() == nil
}
