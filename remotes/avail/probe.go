package avail

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// The probe's search bounds.
const (
	// Depth: the probe's first block known to be kept is this far below
	// the remote's head, inside any pruned node's window (geth keeps 128)
	// and below where a lagging remote or a reorg makes answers unsure.
	Depth = 16
	// maxCalls bounds the calls for one kind at one remote. The search
	// stops there with the oldest block it saw served: a window found a
	// little short costs some calls another remote could have served, never
	// a wasted attempt.
	maxCalls = 12
)

// Probed is the result of one remote's probe: the oldest block of each kind
// of data it served (a kind the probe could not settle is absent), at its
// head Head.
type Probed struct {
	At     time.Time         `json:"at"`
	Head   uint64            `json:"head"`
	Oldest map[string]uint64 `json:"oldest"` // by Kind.String()
	// Lacks is, by kind, the block below which the remote was found to
	// keep nothing (absent: as Oldest).
	Lacks map[string]uint64 `json:"lacks,omitempty"`
}

// NewProbed is an empty result of a probe at now and head.
func NewProbed(now time.Time, head uint64) Probed {
	return Probed{At: now, Head: head, Oldest: make(map[string]uint64, len(Kinds)),
		Lacks: make(map[string]uint64, len(Kinds))}
}

// Set records what the probe found of kind k.
func (p Probed) Set(k Kind, oldest, lacks uint64) {
	p.Oldest[k.String()], p.Lacks[k.String()] = oldest, lacks
}

// Of is what the probe found of kind k; ok false when it could not settle
// it.
func (p Probed) Of(k Kind) (oldest, lacks uint64, ok bool) {
	oldest, ok = p.Oldest[k.String()]
	if !ok {
		return 0, 0, false
	}
	lacks, known := p.Lacks[k.String()]
	if !known || lacks > oldest {
		lacks = oldest
	}
	return oldest, lacks, true
}

// Search is the oldest block of a kind that a remote served, and the block
// below which it served none, as far as at most maxCalls questions to has
// tell; ok false when they could not tell (the method is not served, the
// remote failed). has asks the remote for block n: served when it
// answered with the data, settled when the answer says either way. The
// search asks block 1 first (an archive answers it: one call), then
// gallops down from the head, where pruned windows end, and halves the gap
// left.
func Search(head uint64, has func(n uint64) (served, settled bool)) (oldest, lacks uint64, ok bool) {
	calls := 0
	ask := func(n uint64) (served, settled bool) {
		calls++
		return has(n)
	}
	served, settled := ask(1)
	if !settled {
		return 0, 0, false
	}
	if served {
		return 0, 0, true
	}
	good, bad := head-Depth, uint64(1)
	if served, settled = ask(good); !settled || !served {
		return 0, 0, false // not even recent blocks: a broken remote, not a window
	}
	for d := uint64(2 * Depth); calls < maxCalls && d < head && head-d > bad; d *= 4 {
		served, settled = ask(head - d)
		if !settled {
			return good, bad + 1, true
		}
		if !served {
			bad = head - d
			break
		}
		good = head - d
	}
	for calls < maxCalls && good-bad > 1 {
		mid := bad + (good-bad)/2
		served, settled = ask(mid)
		if !settled {
			break
		}
		if served {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, bad + 1, true
}

// Call is the call that reads kind k at block n, and as little else as a
// node allows.
func Call(k Kind, n uint64) (string, json.RawMessage) {
	b := strconv.Quote("0x" + strconv.FormatUint(n, 16))
	switch k {
	case evm.DataState:
		return "eth_getBalance", json.RawMessage(`["0x0000000000000000000000000000000000000000",` + b + `]`)
	case evm.DataBlocks:
		return "eth_getBlockByNumber", json.RawMessage(`[` + b + `,false]`)
	case evm.DataLogs:
		return "eth_getLogs", json.RawMessage(fmt.Sprintf(`[{"fromBlock":%s,"toBlock":%s}]`, b, b))
	}
	return "trace_block", json.RawMessage(`[` + b + `]`)
}

// minPrunedWindow is the shortest state window nodes keep (geth's 128
// blocks): a call above it is served by every remote.
const minPrunedWindow = 128

// Wanted says whether a chain wants its probes: its channel is closed by
// the chain's first call for old data (a chain nobody asks for history
// costs no probe).
type Wanted struct {
	seen atomic.Bool
	ch   chan struct{}
	// early is 1 + the oldest block asked before the chain had a head (0:
	// none).
	early atomic.Uint64
}

// NewWanted is a Wanted no call has come to yet.
func NewWanted() *Wanted { return &Wanted{ch: make(chan struct{})} }

// C is closed once the probes are wanted.
func (w *Wanted) C() <-chan struct{} { return w.ch }

// Note tells the probes that a call for old data came: a block more than
// a state window below the head, which a pruned remote may not keep. A
// call that comes before the chain has a head (head 0) is kept, and
// judged against the first head (Due).
func (w *Wanted) Note(histAt, head uint64) {
	if w.seen.Load() {
		return
	}
	if head == 0 {
		for {
			old := w.early.Load()
			if old != 0 && old-1 <= histAt || w.early.CompareAndSwap(old, histAt+1) {
				return
			}
		}
	}
	if histAt+minPrunedWindow < head && w.seen.CompareAndSwap(false, true) {
		close(w.ch)
	}
}

// Due says whether the probes are wanted at the chain's head: a call for
// old data came, or one came before the first head and is old at this one.
func (w *Wanted) Due(head uint64) bool {
	if early := w.early.Load(); early != 0 && head != 0 {
		w.Note(early-1, head)
	}
	return w.seen.Load()
}
