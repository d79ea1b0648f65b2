package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/retry"
)

// newPendingTransactions without a WebSocket remote: a pending-transaction
// filter (eth_newPendingTransactionFilter) on one remote, polled with
// eth_getFilterChanges. Every notification is what the WebSocket relay
// would have given: a hash, or the transaction object geth's filter (and
// subscription) builds with fullTx.
const (
	pendingFilterMethod = "eth_newPendingTransactionFilter"
	filterChangesMethod = "eth_getFilterChanges"
	uninstallMethod     = "eth_uninstallFilter"
	txByHashMethod      = "eth_getTransactionByHash"

	// DefaultPollInterval is how often a pending-transaction filter is
	// polled: hashes come at most this late, and the remote gets one call
	// per interval per kind (hashes, full transactions) however many
	// clients subscribe.
	DefaultPollInterval = time.Second
	// pollMaxFailures failed polls in a row give the filter's remote up:
	// the relay moves on (a filter the remote forgot is made again, not
	// counted).
	pollMaxFailures = 3
	// pollUninstallTimeout bounds the eth_uninstallFilter sent when the
	// relay ends; the remote drops an unpolled filter by itself later
	// (geth after 5 minutes) if it does not arrive.
	pollUninstallTimeout = 2 * time.Second
	// pollFetchConcurrency bounds the eth_getTransactionByHash calls in
	// flight for one poll's hashes, when full transactions come from a
	// remote whose filter answers hashes only.
	pollFetchConcurrency = 8
)

var (
	// errNoPoller: no remote can make a pending-transaction filter now
	// (none has the method, none is in rotation, or each failed lately
	// while a WebSocket remote can be waited for).
	errNoPoller = errors.New("no remote with a pending-transaction filter is in rotation")
	// errYieldToWS: a WebSocket remote can relay again; the filter was
	// given up for it.
	errYieldToWS = errors.New("a WebSocket remote can relay again")
)

// pendingParams reads newPendingTransactions params: ok when they are
// ["newPendingTransactions"] or ["newPendingTransactions", bool], and full
// when the bool is true.
func pendingParams(params json.RawMessage) (full, ok bool) {
	var args []json.RawMessage
	if json.Unmarshal(params, &args) != nil || len(args) == 0 || len(args) > 2 {
		return false, false
	}
	var name string
	if json.Unmarshal(args[0], &name) != nil || name != "newPendingTransactions" {
		return false, false
	}
	if len(args) == 2 && json.Unmarshal(args[1], &full) != nil {
		return false, false
	}
	return full, true
}

// canPoll: the remote may be asked for a pending-transaction filter.
func canPoll(r Upstream) bool {
	return r.Supports(pendingFilterMethod) && r.Supports(filterChangesMethod)
}

// lacksPending reports whether no remote can serve newPendingTransactions
// in any way: every remote with a ws url lacks the subscription key
// names, and every remote lacks the filter methods (by config, or because
// it said so).
func (rl *Relays) lacksPending(key string) bool {
	for _, r := range rl.p.Members() {
		if r.CanSubscribe() && !r.Lacks(key) || canPoll(r) {
			return false
		}
	}
	return true
}

// pollPending relays newPendingTransactions from a filter, on the best
// remote that has one (ws picks the WebSocket remotes), until ctx ends, a WebSocket remote can relay again
// (one is in rotation and past its backoff: errYieldToWS), or the
// filter's remote fails (its error; the next call goes to another
// remote). A remote that lacks the method is passed over for the next. It
// returns errNoPoller when no remote can make a filter, and, when wsWaits
// (a WebSocket remote that failed lately can be waited for instead), also
// when every one failed lately.
func (rl *Relays) pollPending(ctx context.Context, ws *picker, full, wsWaits bool, up func(), fn func(json.RawMessage)) error {
	p := rl.p
	pk := rl.pollPicker()
	for range len(p.Members()) + 1 { // each turn rules a remote out, or returns
		r, failed, ok := pk.pick(p.Now())
		if !ok || failed.n > 0 && wsWaits {
			return errNoPoller
		}
		if d := failed.retryAt().Sub(p.Now()); d > 0 && !retry.Sleep(ctx, d) {
			return ctx.Err()
		}
		id, err := rl.newPendingFilter(ctx, r, full)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !canPoll(r) {
				continue // it lacks the method (MarkUnsupported): the next one
			}
			rl.poll.note(r, p.Now())
			if failed.n > 0 {
				return err // it was the last one left
			}
			continue
		}
		f := pendingPoll{r: r, id: id, full: full, ws: ws, up: up, fn: fn}
		err = rl.pollFilter(ctx, &f)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pollUninstallTimeout)
		if _, uerr := r.Call(uctx, uninstallMethod, quotedParam(f.id)); uerr != nil {
			r.Logger().Debug("pending transactions: uninstall filter", "err", uerr)
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errYieldToWS) {
			rl.poll.note(r, p.Now())
		}
		return err
	}
	return errNoPoller
}

// newPendingFilter makes a pending-transaction filter on r and returns its
// id. Full transactions ask for geth's fullTx.
func (rl *Relays) newPendingFilter(ctx context.Context, r Upstream, full bool) (string, error) {
	params := json.RawMessage(`[]`)
	if full {
		params = json.RawMessage(`[true]`)
	}
	res, err := r.Call(ctx, pendingFilterMethod, params)
	if err != nil {
		return "", fmt.Errorf("relay: %s: %w", pendingFilterMethod, err)
	}
	id, err := strconv.Unquote(string(res))
	if err != nil || id == "" {
		return "", fmt.Errorf("relay: %s: %w", pendingFilterMethod, wire.BadReply(r.Name(), "filter id is not a string"))
	}
	r.Logger().Info("pending transactions: polling a filter (no WebSocket remote can relay)",
		"full", full, "interval", rl.p.PollInterval())
	return id, nil
}

// pendingPoll is one pending-transaction filter polled for a relay: its
// remote and id, and what the relay asked for.
type pendingPoll struct {
	r    Upstream
	id   string  // a new one once the remote forgot the filter and it was made again
	full bool    // full transactions, not hashes
	ws   *picker // the subscription's: a WebSocket remote it picks ends the poll
	up   func()
	fn   func(json.RawMessage)
}

// pollFilter polls f's filter every poll interval and hands each
// transaction to f.fn. A filter the remote forgot is made again (f.id then
// holds the new one). It returns the error of pollMaxFailures failed polls
// in a row, or of a failed remake, or errYieldToWS.
func (rl *Relays) pollFilter(ctx context.Context, f *pendingPoll) error {
	r, full, fn := f.r, f.full, f.fn
	f.up()
	t := time.NewTicker(rl.p.PollInterval())
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now := rl.p.Now()
		ws, failed, wsOK := f.ws.pick(now)
		yield := wsOK && !failed.retryAt().After(now)
		res, err := r.Call(ctx, filterChangesMethod, quotedParam(f.id))
		if yield {
			// What came since the last poll still goes out; what comes
			// until the subscription is in place is lost, as on any
			// resubscription.
			if err == nil && len(res) > 0 && res[0] == '[' {
				deliverChanges(ctx, r, full, res, fn)
			}
			r.Logger().Info("pending transactions: a WebSocket remote can relay again; leaving the filter", "to", ws.Name())
			return errYieldToWS
		}
		if err == nil && (len(res) == 0 || res[0] != '[') {
			err = wire.BadReply(r.Name(), "filter changes are not an array")
		}
		switch {
		case err == nil:
			failures = 0
			deliverChanges(ctx, r, full, res, fn)
		case ctx.Err() != nil:
			return ctx.Err()
		case isFilterNotFound(err):
			r.Logger().Info("pending transactions: the remote forgot the filter; making it again")
			nid, err := rl.newPendingFilter(ctx, r, full)
			if err != nil {
				return err
			}
			f.id = nid
			failures = 0
		default:
			if failures++; failures >= pollMaxFailures {
				return fmt.Errorf("relay: %s: %d failures in a row, the last: %w", filterChangesMethod, failures, err)
			}
		}
	}
}

// deliverChanges hands each item of one eth_getFilterChanges answer to fn,
// in order. Hashes where full transactions were asked for (a remote that
// ignores fullTx) are fetched by hash from r, pollFetchConcurrency at a
// time; one it no longer has is skipped.
func deliverChanges(ctx context.Context, r Upstream, full bool, res json.RawMessage, fn func(json.RawMessage)) {
	var items []json.RawMessage
	it := jsonscan.Array{Data: res, I: 1}
	for {
		v, ok := it.Next()
		if !ok {
			break
		}
		items = append(items, bytes.Clone(v)) // a copy: the subscriber queues it
	}
	if full {
		var g errgroup.Group
		g.SetLimit(pollFetchConcurrency)
		for i, v := range items {
			if len(v) == 0 || v[0] != '"' {
				continue
			}
			g.Go(func() error {
				tx, err := r.Call(ctx, txByHashMethod, json.RawMessage("["+string(v)+"]"))
				if err != nil || len(tx) == 0 || tx[0] != '{' {
					r.Logger().Debug("pending transactions: fetch by hash", "err", err)
					tx = nil
				}
				items[i] = tx
				return nil
			})
		}
		_ = g.Wait()
	}
	for _, v := range items {
		if len(v) > 0 {
			fn(v)
		}
	}
}

// isFilterNotFound reports a remote's answer for a filter it does not
// hold: geth, erigon and reth say "filter not found", Nethermind "Filter
// with id ... does not exist".
func isFilterNotFound(err error) bool {
	var ue *wire.UpstreamError
	if !errors.As(err, &ue) {
		return false
	}
	m := strings.ToLower(ue.Err.Message)
	return strings.Contains(m, "filter") && (strings.Contains(m, "not found") || strings.Contains(m, "does not exist"))
}

// quotedParam is the params [s].
func quotedParam(s string) json.RawMessage {
	return json.RawMessage("[" + strconv.Quote(s) + "]")
}
