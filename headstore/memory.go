package headstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// Memory is a chain's head store inside one process: the embedded default,
// with no Redis. Its leader is this process, at MemoryEpoch.
type Memory struct {
	size int

	mu        sync.Mutex
	gen       string
	seq       uint64
	canon     []*evm.Block
	safe      uint64
	finalized uint64
	events    []*Event      // the newest, at most 4×size
	wake      chan struct{} // closed and replaced on every publish

	// Headers announced (PublishHeader): the newest maxAhead, and how
	// many were ever announced; hwake is closed and replaced on each.
	headers   []*Header
	nheaders  uint64
	hwake     chan struct{}
	hfollowed int // FollowHeaders running
}

// MemoryEpoch is the only epoch a Memory store accepts: without Redis the
// process leads every chain, once.
const MemoryEpoch = 1

var _ Store = (*Memory)(nil)

// NewMemory returns an empty store keeping size blocks (0: DefaultWindow).
func NewMemory(size int) *Memory {
	if size <= 0 {
		size = DefaultWindow
	}
	return &Memory{size: size, gen: newGen(), wake: make(chan struct{}), hwake: make(chan struct{})}
}

// newGen names a fresh history.
func newGen() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Publish implements Store.
func (m *Memory) Publish(_ context.Context, epoch uint64, ev *Event) error {
	if epoch != MemoryEpoch {
		return ErrFenced
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Seq != 0 && ev.Seq != m.seq {
		return ErrStale
	}
	m.seq++
	ev.Seq, ev.Epoch = m.seq, epoch
	if ev.Time == 0 {
		ev.Time = time.Now().UnixNano()
	}
	m.canon = nextCanon(m.canon, ev.Dropped, ev.Added, firstParent(ev.Added), m.size)
	if ev.Safe > 0 {
		m.safe = ev.Safe
	}
	if ev.Finalized > 0 {
		m.finalized = ev.Finalized
	}
	m.events = append(m.events, ev)
	if len(m.events) > 4*m.size {
		m.events = append(m.events[:0:0], m.events[len(m.events)-2*m.size:]...)
	}
	close(m.wake)
	m.wake = make(chan struct{})
	return nil
}

// Snapshot implements Store.
func (m *Memory) Snapshot(context.Context) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &Snapshot{Gen: m.gen, Seq: m.seq, Blocks: append([]*evm.Block(nil), m.canon...),
		Safe: m.safe, Finalized: m.finalized}, nil
}

// Follow implements Store.
func (m *Memory) Follow(ctx context.Context, gen string, seq uint64, fn func(*Event) error) error {
	for {
		m.mu.Lock()
		if gen != m.gen || seq > m.seq {
			m.mu.Unlock()
			return ErrGap
		}
		var next []*Event
		if seq < m.seq {
			first := m.events[0].Seq
			if seq+1 < first {
				m.mu.Unlock()
				return ErrGap
			}
			next = append(next, m.events[seq+1-first:]...)
		}
		wake := m.wake
		m.mu.Unlock()
		for _, ev := range next {
			if err := fn(ev); err != nil {
				return err
			}
			seq = ev.Seq
		}
		if len(next) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

var _ HeaderStore = (*Memory)(nil)

// PublishHeader implements HeaderStore.
func (m *Memory) PublishHeader(_ context.Context, epoch uint64, h *Header) error {
	if epoch != MemoryEpoch {
		return ErrFenced
	}
	h.Epoch = epoch
	if h.Time == 0 {
		h.Time = time.Now().UnixNano()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headers = append(m.headers, h)
	if len(m.headers) > maxAhead {
		m.headers = append(m.headers[:0:0], m.headers[len(m.headers)-maxAhead:]...)
	}
	m.nheaders++
	close(m.hwake)
	m.hwake = make(chan struct{})
	return nil
}

// FollowHeaders implements HeaderStore.
func (m *Memory) FollowHeaders(ctx context.Context, fn func(*Header)) error {
	m.mu.Lock()
	seen := m.nheaders
	m.hfollowed++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.hfollowed--
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		wake := m.hwake
		var next []*Header
		if n := m.nheaders - seen; n > 0 {
			next = m.headers[len(m.headers)-int(min(n, uint64(len(m.headers)))):]
			seen = m.nheaders
		}
		m.mu.Unlock()
		for _, h := range next {
			fn(h)
		}
		if len(next) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// headersFollowed reports whether a FollowHeaders runs (tests).
func (m *Memory) headersFollowed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hfollowed > 0
}
