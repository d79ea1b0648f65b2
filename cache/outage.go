package cache

import (
	"errors"
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
// server is back. The cache counts the failures and logs the outage (one
// line when it starts, one when it ends).
const outagePause = 500 * time.Millisecond

// outage is a tier's view of its server, as its calls find it.
type outage struct {
	retryAt atomic.Int64 // unix ns; after a failure, the server is not asked before it
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
func (o *outage) failed() { o.retryAt.Store(time.Now().Add(outagePause).UnixNano()) }

// ok records that the server answered.
func (o *outage) ok() {
	if o.retryAt.Load() != 0 {
		o.retryAt.Store(0)
	}
}
