package headstore

import (
	"context"
	"errors"

	"github.com/venn-gateway/venn/evm"
)

// Ref names a block.
type Ref struct {
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
}

// Event is one change of a chain's head, as the leader publishes it: a new
// head (Added holds one block, or several after a gap), or a reorg
// (Dropped holds the orphaned blocks, Added the new branch). Added is in
// ascending order and contiguous; Added[0].Parent is the block below it.
type Event struct {
	// Seq is assigned by the store: 1, 2, 3... per chain, with no gap.
	// Given to Publish, a non-zero Seq is the seq the writer last saw.
	Seq uint64 `json:"seq"`
	// Epoch is the fencing token of the leader that published it.
	Epoch uint64 `json:"epoch"`
	// Time is when the leader published, in Unix nanoseconds: followers
	// measure their lag from it.
	Time      int64        `json:"time"`
	Dropped   []Ref        `json:"dropped,omitempty"`
	Added     []*evm.Block `json:"added"`
	Safe      uint64       `json:"safe,omitempty"`
	Finalized uint64       `json:"finalized,omitempty"`
}

// Head is the highest added block's number, or 0.
func (ev *Event) Head() uint64 {
	if len(ev.Added) == 0 {
		return 0
	}
	return ev.Added[len(ev.Added)-1].Number
}

// Snapshot is a chain's whole window at one sequence number: what a
// replica loads at start, and after any break in the event stream.
type Snapshot struct {
	// Gen identifies the store's history: it changes when the store lost
	// its data (a Redis restart), and sequence numbers restart with it.
	Gen       string
	Seq       uint64
	Blocks    []*evm.Block // canonical, ascending
	Safe      uint64
	Finalized uint64
}

// Errors a Store returns.
var (
	// ErrFenced: the writer's epoch is not the chain's current one; a
	// newer leader exists. The write was not applied.
	ErrFenced = errors.New("headstore: fenced: a newer leader holds the chain")
	// ErrGap: the events after the requested sequence number are gone
	// (trimmed, or the store lost its data); reload a snapshot.
	ErrGap = errors.New("headstore: events lost; reload the snapshot")
	// ErrStale: the store is not at the seq the writer last saw: it lost
	// events the writer published (a failed-over Redis that had not
	// replicated them) or holds others. The write was not applied; the
	// writer reloads the snapshot.
	ErrStale = errors.New("headstore: stale: the store is not where the writer left it")
)

// Store is where the leader publishes a chain's head events and where every
// replica reads them. Implementations: Redis (the cluster) and memory (one
// process).
type Store interface {
	// Publish appends ev, assigning ev.Seq, and updates the stored window,
	// all at once and only if epoch is the chain's current epoch
	// (ErrFenced otherwise) and, when ev.Seq is not zero, the store's seq
	// is ev.Seq: the one the writer last saw (ErrStale otherwise).
	Publish(ctx context.Context, epoch uint64, ev *Event) error
	// Snapshot reads the stored window and the sequence number it is at.
	Snapshot(ctx context.Context) (*Snapshot, error)
	// Follow calls fn for every event after seq, in order, until ctx ends
	// (returning ctx.Err()), fn fails (returning its error), or the stream
	// broke (ErrGap, or a connection error after which the caller should
	// reload the snapshot).
	Follow(ctx context.Context, gen string, seq uint64, fn func(*Event) error) error
}
