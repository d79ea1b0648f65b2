package subcenter

import (
	"context"
	"encoding/json"
	"time"
)

// pendingChanges is a pending filter's changes: the transactions on the
// pending feed after its place. Polling it keeps this replica's relay of
// its mode running, so the feed keeps filling while any replica is polled.
func (f *Filters) pendingChanges(ctx context.Context, st *FilterState) (json.RawMessage, FilterPos, error) {
	f.useRelay(st.FullTx)
	items, next, err := f.pending.Read(ctx, st.FullTx, st.Pos.Pending, pendingReadMax)
	if err != nil {
		return nil, st.Pos, f.storeError(err)
	}
	var out jsonList
	for _, it := range items {
		out.add(it)
	}
	return out.json(), FilterPos{Cursor: st.Pos.Cursor, Pending: next}, nil
}

// useRelay keeps the relay of mode full running (starting it) for one
// more filter timeout; a no-op without a relay.
func (f *Filters) useRelay(full bool) *pendingRelay {
	if f.relay == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := mode(full)
	r := f.relays[m]
	if r == nil {
		ctx, cancel := context.WithCancel(f.ctx)
		r = &pendingRelay{cancel: cancel, ready: make(chan struct{})}
		if !f.crew.Go(func() { f.runRelay(ctx, r, full) }) {
			cancel()
			return r
		}
		f.relays[m] = r
	}
	r.used.Store(time.Now().UnixNano())
	return r
}

// awaitRelay starts the relay of mode full, if it is not running, and
// waits (at most DefaultRelayStartWait) for its upstream to be in place,
// so that a new filter misses no transaction sent after it was made.
func (f *Filters) awaitRelay(ctx context.Context, full bool) error {
	r := f.useRelay(full)
	t := time.NewTimer(DefaultRelayStartWait)
	defer t.Stop()
	select {
	case <-r.ready:
	case <-t.C:
		return nil // accepted; the relay keeps trying
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := r.err.Load(); err != nil {
		return errPendingUnsupported
	}
	return nil
}

// runRelay relays mode full's pending transactions to the pending feed
// until no filter used it for the filter timeout, or Stop.
func (f *Filters) runRelay(ctx context.Context, r *pendingRelay, full bool) {
	defer func() {
		f.mu.Lock()
		if f.relays[mode(full)] == r {
			f.relays[mode(full)] = nil
		}
		f.mu.Unlock()
		r.cancel()
	}()
	params := json.RawMessage(`["` + pendingKind + `"]`)
	if full {
		params = json.RawMessage(`["` + pendingKind + `",true]`)
	}
	// The idle check: the relay ends once no create or poll used it for a
	// whole timeout.
	f.crew.Go(func() {
		for {
			timeout := f.cfg.Load().Timeout
			left := time.Until(time.Unix(0, r.used.Load()).Add(timeout))
			if left <= 0 {
				r.cancel()
				return
			}
			t := time.NewTimer(left)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
	up := func() { r.once.Do(func() { close(r.ready) }) }
	for ctx.Err() == nil {
		err := f.relay.Relay(ctx, params, up, func(res json.RawMessage) {
			k := txKey(res)
			if k == "" {
				return
			}
			if err := f.pending.Add(ctx, full, []string{k}, [][]byte{res}); err != nil && ctx.Err() == nil {
				f.log.Warn("pending filter feed: add failed", "err", err)
			}
		})
		if ctx.Err() != nil {
			return
		}
		if relayUnsupported(err) {
			r.err.Store(&err)
			up()
			f.log.Warn("pending filters: no remote relays pending transactions", "err", err)
			return
		}
		f.log.Warn("pending filters: relay failed; retrying", "err", err)
		t := time.NewTimer(relayRetry)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}
