package cache

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of the shared tiers (Redis, Postgres). Each is a miss to the
// cache; the orchestrator tells them apart to count them.
var (
	// ErrTooLarge is returned by Set for an entry whose value passes the
	// tier's max entry bytes: it is not stored ("too_large").
	ErrTooLarge = errors.New("cache: entry too large for the tier")
	// ErrNotSettled is returned by the Postgres tier's Set for an entry
	// that is not settled: only answers that can never change are kept
	// durably.
	ErrNotSettled = errors.New("cache: the tier keeps settled entries only")
	// ErrDown is returned, wrapped, by a tier whose server has just failed
	// and that is not asking it again until a short pause has passed.
	ErrDown = errors.New("cache: tier recently failed")
)

// outagePause is how long a tier stops asking its server after a failure:
// with Redis or Postgres down or stalled, a call must not each wait out a
// timeout before it is a miss; one call per pause finds out whether the
// server is back.
const outagePause = 500 * time.Millisecond

// outage is a tier's view of its server, as its calls find it. The first
// failure of an outage logs one line and the first success after it
// another, however many calls fail in between.
type outage struct {
	tier string
	log  *slog.Logger

	retryAt atomic.Int64 // unix ns; after a failure, the server is not asked before it
	down    atomic.Bool
	mu      sync.Mutex // orders the logs with the state changes
	since   time.Time
}

func newOutage(tier string, log *slog.Logger) *outage {
	if log == nil {
		log = slog.Default()
	}
	return &outage{tier: tier, log: log.With("component", "cache", "tier", tier)}
}

// allow returns ErrDown while the pause after a failure runs.
func (o *outage) allow() error {
	if at := o.retryAt.Load(); at != 0 && time.Now().UnixNano() < at {
		return ErrDown
	}
	return nil
}

// failed records that the server failed a call (not the caller's own
// cancellation: the caller checks that first).
func (o *outage) failed(err error) {
	o.retryAt.Store(time.Now().Add(outagePause).UnixNano())
	if o.down.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down.Load() {
		return
	}
	o.down.Store(true)
	o.since = time.Now()
	o.log.Warn("cache tier unreachable: its calls are misses until it answers", "err", err)
}

// ok records that the server answered.
func (o *outage) ok() {
	if !o.down.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() {
		return
	}
	o.down.Store(false)
	o.retryAt.Store(0)
	o.log.Info("cache tier reachable again", "outage", time.Since(o.since).Round(time.Millisecond))
}
