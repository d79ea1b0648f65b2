// The filter methods: eth_newFilter, eth_newBlockFilter and
// eth_newPendingTransactionFilter, polled by eth_getFilterChanges, read
// by eth_getFilterLogs, ended by eth_uninstallFilter, answered by venn
// itself from the head window and valid on every replica.

package subcenter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
)

// Filter defaults.
const (
	// DefaultFilterTimeout is how long a filter lives unpolled: geth's.
	DefaultFilterTimeout = 5 * time.Minute
	// DefaultMaxFiltersPerClient caps the live filters of one API key, or
	// of one client address without keys.
	DefaultMaxFiltersPerClient = 1000
	// DefaultMaxFiltersPerChain caps the live filters of one chain.
	DefaultMaxFiltersPerChain = 100_000

	// maxBlockGap bounds the hashes one poll of a block filter reads from
	// below the window; the rest come with the next polls.
	maxBlockGap = 1024
	// maxPollAttempts bounds a poll that keeps losing its cursor to other
	// polls of the same filter.
	maxPollAttempts = 8
)

// FilterConfig is a chain's polled filters (the chain's filters:).
type FilterConfig struct {
	// Timeout is how long a filter lives without a poll; 0:
	// DefaultFilterTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// MaxPerClient caps the live filters of one API key (of one client
	// address without keys); 0: DefaultMaxFiltersPerClient.
	MaxPerClient int `yaml:"max_per_client"`
	// MaxPerChain caps the chain's live filters; 0:
	// DefaultMaxFiltersPerChain.
	MaxPerChain int `yaml:"max_per_chain"`
}

// WithDefaults fills the zero fields.
func (c FilterConfig) WithDefaults() FilterConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultFilterTimeout
	}
	if c.MaxPerClient == 0 {
		c.MaxPerClient = DefaultMaxFiltersPerClient
	}
	if c.MaxPerChain == 0 {
		c.MaxPerChain = DefaultMaxFiltersPerChain
	}
	return c
}

// Validate reports the config's problems, each naming its field.
func (c FilterConfig) Validate() error {
	var errs []error
	if c.Timeout < 0 || c.Timeout > 0 && c.Timeout < time.Second {
		errs = append(errs, fmt.Errorf("timeout: must be at least 1s (0 or absent is %s), not %s", DefaultFilterTimeout, c.Timeout))
	}
	if c.MaxPerClient < 0 {
		errs = append(errs, fmt.Errorf("max_per_client: must be positive (0 or absent is %d), not %d", DefaultMaxFiltersPerClient, c.MaxPerClient))
	}
	if c.MaxPerChain < 0 {
		errs = append(errs, fmt.Errorf("max_per_chain: must be positive (0 or absent is %d), not %d", DefaultMaxFiltersPerChain, c.MaxPerChain))
	}
	return errors.Join(errs...)
}

// Errors a filter's client sees (errors.go).
var (
	errFilterNotFound error = &plainError{msg: "filter not found"}
	errFilterStore    error = storeDownError{}
	errFilterBusy     error = &plainError{msg: "filter polled by too many calls at once; try again"}

	errPendingFilterUnserved error = &unservedError{msg: "eth_newPendingTransactionFilter needs a remote with a ws_url, " +
		"or one that serves eth_newPendingTransactionFilter; this chain has none"}
)

// Filters answers one chain's filter methods itself: a filter's state (its
// kind, criteria, owner and cursor) is in a FilterStore every replica
// reads, so a filter made through one replica is polled through any other.
// A poll reads the changes since the filter's cursor from the head window
// (headstore.Window.Since: the logs of orphaned blocks again with
// removed: true, then the new branch's), what lies below the window from
// the chain's own eth_getLogs path (history, then the remotes, split), and
// moves the cursor with a compare-and-set, so that two polls at once never
// deliver one change twice or lose one. A poll the window answers costs no
// upstream call. Pending-transaction filters read a PendingFeed that the
// replicas polling them fill from the chain's Relay.
//
// Every goroutine it starts (the pending relays) ends with Stop.
type Filters struct {
	chain   string
	w       *headstore.Window
	store   FilterStore
	pending PendingFeed
	relay   Relay // nil: no pending filters
	cfg     atomic.Pointer[FilterConfig]
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	crew   crew

	mu     sync.Mutex
	relays [2]*pendingRelay // by mode, while running
}

// pendingRelay is a pending relay this replica runs for the filters polled
// through it, until none was for the filter timeout.
type pendingRelay struct {
	cancel context.CancelFunc
	used   atomic.Int64 // unix nanoseconds of the last create or poll
	ready  chan struct{}
	once   sync.Once
	err    atomic.Pointer[error] // set when no remote serves it
}

// NewFilters returns chain's filters, kept in store and read from w;
// pending and relay serve pending-transaction filters (relay nil: none).
func NewFilters(chain string, w *headstore.Window, store FilterStore, pending PendingFeed, relay Relay, cfg FilterConfig, log *slog.Logger) *Filters {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if pending == nil {
		pending = NewMemoryPending()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Filters{chain: chain, w: w, store: store, pending: pending, relay: relay,
		log: log.With("chain", chain), ctx: ctx, cancel: cancel}
	f.SetConfig(cfg)
	return f
}

// SetConfig puts cfg (defaulted) in force, for a reload.
func (f *Filters) SetConfig(cfg FilterConfig) {
	cfg = cfg.WithDefaults()
	f.cfg.Store(&cfg)
}

// Stop ends the pending relays and waits for them.
func (f *Filters) Stop() {
	f.cancel()
	f.crew.stop()
}

// ServeFilter answers one filter method. via is the chain's router, which
// the filters ask for what the window lacks (eth_getLogs below it, an
// orphan it never saw), so those go through its sources and limits.
func (f *Filters) ServeFilter(ctx context.Context, via jrpc.Handler, req *jrpc.Request) (json.RawMessage, error) {
	args, err := filterArgs(req.Params)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "eth_newFilter":
		if err := argCount(args, 1, 1); err != nil {
			return nil, err
		}
		if _, err := parseLogFilter(args[0], filterLimits{addresses: evm.LogQueryLimit, topics: evm.LogQueryLimit}); err != nil {
			var le *limitError
			if errors.As(err, &le) {
				return nil, le
			}
			return nil, invalidParams("invalid argument 0: " + err.Error())
		}
		return f.create(ctx, via, &FilterState{Kind: filterLogs, Crit: bytes.Clone(args[0])})
	case "eth_newBlockFilter":
		if err := argCount(args, 0, 0); err != nil {
			return nil, err
		}
		return f.create(ctx, via, &FilterState{Kind: filterBlocks})
	case "eth_newPendingTransactionFilter":
		if err := argCount(args, 0, 1); err != nil {
			return nil, err
		}
		st := &FilterState{Kind: filterPending}
		if len(args) == 1 {
			var full *bool
			if err := json.Unmarshal(args[0], &full); err != nil {
				return nil, invalidParams("invalid argument 0: " + err.Error())
			}
			st.FullTx = full != nil && *full
		}
		return f.create(ctx, via, st)
	}
	id, err := filterID(args)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "eth_getFilterChanges":
		return f.poll(ctx, via, id)
	case "eth_getFilterLogs":
		return f.filterLogs(ctx, via, id)
	case "eth_uninstallFilter":
		st, err := f.store.Get(ctx, id)
		if errors.Is(err, ErrFilterGone) {
			return json.RawMessage("false"), nil
		}
		if err != nil {
			return nil, f.storeError(err)
		}
		ok, err := f.store.Remove(ctx, id, st.Owner)
		if err != nil {
			return nil, f.storeError(err)
		}
		if ok {
			return json.RawMessage("true"), nil
		}
		return json.RawMessage("false"), nil
	}
	return nil, &unservedError{msg: "the method " + req.Method + " does not exist/is not available"}
}

// filterArgs reads the params array (absent or null: none).
func filterArgs(params json.RawMessage) ([]json.RawMessage, error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return nil, nil
	}
	var args []json.RawMessage
	if err := json.Unmarshal(p, &args); err != nil {
		return nil, invalidParams("non-array args")
	}
	return args, nil
}

// argCount checks the arguments' count as geth's rpc package does.
func argCount(args []json.RawMessage, required, most int) error {
	if len(args) > most {
		return invalidParams(fmt.Sprintf("too many arguments, want at most %d", most))
	}
	for i := len(args); i < required; i++ {
		return invalidParams(fmt.Sprintf("missing value for required argument %d", i))
	}
	return nil
}

// filterID reads the one argument of the polling methods.
func filterID(args []json.RawMessage) (string, error) {
	if err := argCount(args, 1, 1); err != nil {
		return "", err
	}
	var id string
	if err := json.Unmarshal(args[0], &id); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return "", invalidParams("invalid argument 0: json: cannot unmarshal " + te.Value + " into Go value of type rpc.ID")
		}
		return "", invalidParams("invalid argument 0: " + err.Error())
	}
	return strings.ToLower(id), nil
}

// owner is who a filter counts against: the caller's API key, or its
// address without keys.
func owner(ctx context.Context) string {
	p, ok := jrpc.PeerFromContext(ctx)
	switch {
	case !ok:
		return "-"
	case p.Key != "":
		return "key:" + p.Key
	case p.ClientIP.IsValid():
		return "ip:" + p.ClientIP.String()
	}
	return "-"
}

// storeError is what a client sees of a store that failed: the detail is
// logged, never sent.
func (f *Filters) storeError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	f.log.Warn("filter store failed", "err", err)
	return errFilterStore
}

// create makes a filter that starts at the window's head.
func (f *Filters) create(ctx context.Context, via jrpc.Handler, st *FilterState) (json.RawMessage, error) {
	cfg := f.cfg.Load()
	st.Owner = owner(ctx)
	if n, h, ok := f.w.Head(); ok {
		st.Pos.Cursor = headstore.Cursor{Number: n, Hash: h}
	} else if n, err := f.remoteHead(ctx, via); err == nil {
		st.Pos.Cursor = headstore.Cursor{Number: n} // no hash known: taken as canonical
	} else {
		return nil, err
	}
	if st.Kind == filterPending {
		if f.relay == nil {
			return nil, errPendingFilterUnserved
		}
		if err := f.awaitRelay(ctx, st.FullTx); err != nil {
			return nil, err
		}
		tail, err := f.pending.Tail(ctx, st.FullTx)
		if err != nil {
			return nil, f.storeError(err)
		}
		st.Pos.Pending = tail
	}
	id := newID()
	switch err := f.store.Create(ctx, id, st, cfg.Timeout, cfg.MaxPerChain, cfg.MaxPerClient); {
	case errors.Is(err, ErrChainFull):
		return nil, &limitError{msg: fmt.Sprintf(
			"too many filters: chain %s holds %d, filters.max_per_chain is %d; uninstall some or let them expire",
			f.chain, cfg.MaxPerChain, cfg.MaxPerChain)}
	case errors.Is(err, ErrOwnerFull):
		return nil, &limitError{msg: fmt.Sprintf(
			"too many filters: this client holds %d on chain %s, filters.max_per_client is %d; uninstall some or let them expire",
			cfg.MaxPerClient, f.chain, cfg.MaxPerClient)}
	case err != nil:
		return nil, f.storeError(err)
	}
	return json.RawMessage(`"` + id + `"`), nil
}

// remoteHead is the chain's head as the router answers eth_blockNumber.
func (f *Filters) remoteHead(ctx context.Context, via jrpc.Handler) (uint64, error) {
	res, err := via.ServeRPC(ctx, &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_blockNumber", Params: json.RawMessage("[]")})
	if err != nil {
		return 0, err
	}
	var s string
	if err := json.Unmarshal(res, &s); err != nil {
		return 0, fmt.Errorf("eth_blockNumber: %w", err)
	}
	return evm.ParseQuantity(s)
}

// poll serves eth_getFilterChanges: the changes since the filter's
// position, delivered once. A poll that loses the race to move the
// cursor reads again from where the winner left it.
func (f *Filters) poll(ctx context.Context, via jrpc.Handler, id string) (json.RawMessage, error) {
	ttl := f.cfg.Load().Timeout
	for range maxPollAttempts {
		st, err := f.store.Get(ctx, id)
		if errors.Is(err, ErrFilterGone) {
			return nil, errFilterNotFound
		}
		if err != nil {
			return nil, f.storeError(err)
		}
		var (
			res  json.RawMessage
			next FilterPos
		)
		switch st.Kind {
		case filterLogs:
			res, next, err = f.logChanges(ctx, via, st)
		case filterBlocks:
			res, next, err = f.blockChanges(ctx, via, st)
		case filterPending:
			res, next, err = f.pendingChanges(ctx, st)
		default:
			return nil, errFilterNotFound
		}
		if err != nil {
			return nil, err
		}
		switch err := f.store.Advance(ctx, id, st.Owner, st.Pos, next, ttl); {
		case err == nil:
			return res, nil
		case errors.Is(err, ErrFilterMoved):
			continue
		case errors.Is(err, ErrFilterGone):
			return nil, errFilterNotFound
		default:
			return nil, f.storeError(err)
		}
	}
	return nil, errFilterBusy
}

// since is the window's changes after the filter's cursor; none while the
// window does not follow the feed (its changes may be stale).
func (f *Filters) since(ctx context.Context, via jrpc.Handler, st *FilterState) (headstore.Changes, error) {
	if _, ok := f.w.Latest(); !ok {
		return headstore.Changes{Next: st.Pos.Cursor}, nil
	}
	ch, err := f.w.Since(ctx, st.Pos.Cursor, fetchOrphan(via))
	if errors.Is(err, headstore.ErrOrphanUnknown) {
		f.log.Warn("filter poll refused: a reorg reached a block venn no longer holds", "err", err)
		return ch, &plainError{msg: "filter changes unavailable: " + err.Error()}
	}
	return ch, err
}

// logChanges is a log filter's changes: the removed logs of orphaned
// blocks, the logs below the window, then the logs of the new blocks.
func (f *Filters) logChanges(ctx context.Context, via jrpc.Handler, st *FilterState) (json.RawMessage, FilterPos, error) {
	lf, err := parseLogFilter(st.Crit, filterLimits{addresses: evm.LogQueryLimit, topics: evm.LogQueryLimit})
	if err != nil {
		return nil, st.Pos, errFilterNotFound // not a filter venn wrote
	}
	ch, err := f.since(ctx, via, st)
	if err != nil {
		return nil, st.Pos, err
	}
	var out jsonList
	for _, b := range ch.Removed {
		for i := range b.Logs {
			if l := &b.Logs[i]; lf.matchesAll(l, b.Number) {
				out.add(removedLog(l.Raw))
			}
		}
	}
	if ch.HasGap {
		from, to := ch.GapFrom, ch.GapTo
		if lf.hasFrom {
			from = max(from, lf.from)
		}
		if lf.hasTo {
			to = min(to, lf.to)
		}
		if from <= to {
			res, err := via.ServeRPC(ctx, &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getLogs",
				Params: rangeParams(st.Crit, from, to)})
			if err != nil {
				return nil, st.Pos, err // geth's limit error among them: never a partial answer
			}
			out.addAll(res)
		}
	}
	for _, b := range ch.Added {
		for i := range b.Logs {
			if l := &b.Logs[i]; lf.matchesAll(l, b.Number) {
				out.add(l.Raw)
			}
		}
	}
	return out.json(), FilterPos{Cursor: ch.Next, Pending: st.Pos.Pending}, nil
}

// rangeParams are eth_getLogs params for the criteria crit over from..to.
func rangeParams(crit []byte, from, to uint64) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(crit, &m) // read before, at eth_newFilter
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	delete(m, "blockHash")
	m["fromBlock"] = json.RawMessage(`"` + evm.Quantity(from) + `"`)
	m["toBlock"] = json.RawMessage(`"` + evm.Quantity(to) + `"`)
	b, _ := json.Marshal([]any{m})
	return b
}

// blockChanges is a block filter's changes: the hashes of the new
// canonical blocks, those below the window (at most maxBlockGap a poll)
// first.
func (f *Filters) blockChanges(ctx context.Context, via jrpc.Handler, st *FilterState) (json.RawMessage, FilterPos, error) {
	ch, err := f.since(ctx, via, st)
	if err != nil {
		return nil, st.Pos, err
	}
	var out jsonList
	next := ch.Next
	if ch.HasGap {
		to := min(ch.GapTo, ch.GapFrom+maxBlockGap-1)
		hashes, err := gapHashes(ctx, via, ch.GapFrom, to)
		if err != nil {
			return nil, st.Pos, err
		}
		for _, h := range hashes {
			out.add([]byte(`"` + h + `"`))
		}
		if to < ch.GapTo {
			// The rest, and the window's blocks, with the next polls.
			return out.json(), FilterPos{Cursor: headstore.Cursor{Number: to, Hash: hashes[len(hashes)-1]}}, nil
		}
	}
	for _, b := range ch.Added {
		out.add([]byte(`"` + b.Hash + `"`))
	}
	return out.json(), FilterPos{Cursor: next}, nil
}

// gapHashes reads the canonical hashes of from..to through the router,
// up to 8 blocks at once: each read notes its upstream exchange in a
// branch of the poll's note (jrpc.Note is the call's goroutine's alone),
// merged once they are all done.
func gapHashes(ctx context.Context, via jrpc.Handler, from, to uint64) ([]string, error) {
	hashes := make([]string, to-from+1)
	notes := jrpc.NewBranches(ctx, len(hashes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for n := from; n <= to; n++ {
		g.Go(func() error {
			res, err := via.ServeRPC(notes.Context(gctx, int(n-from)), &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getBlockByNumber",
				Params: json.RawMessage(`["` + evm.Quantity(n) + `",false]`)})
			if err != nil {
				return err
			}
			var h string
			if json.Unmarshal(jsonscan.Member(res, "hash"), &h) != nil || h == "" {
				return fmt.Errorf("block %d: no block", n)
			}
			hashes[n-from] = strings.ToLower(h)
			return nil
		})
	}
	err := g.Wait()
	notes.Merge(ctx)
	return hashes, err
}

// fetchOrphan finds a block that left the chain through the router (the
// remotes), with its receipts, for a reorg walk past what this replica
// saw.
func fetchOrphan(via jrpc.Handler) headstore.FetchBlock {
	return func(ctx context.Context, hash string) (*evm.Parts, error) {
		q, _ := json.Marshal(hash)
		raw, err := via.ServeRPC(ctx, &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getBlockByHash",
			Params: json.RawMessage(`[` + string(q) + `,true]`)})
		if err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(raw)) == "null" {
			return nil, nil
		}
		rc, err := via.ServeRPC(ctx, &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getBlockReceipts",
			Params: json.RawMessage(`[` + string(q) + `]`)})
		if err != nil {
			return nil, err
		}
		b, err := evm.ParseBlock(raw, rc)
		if err != nil {
			return nil, err
		}
		return evm.Split(b)
	}
}

// filterLogs serves eth_getFilterLogs: the filter's whole range, as
// eth_getLogs answers it (the router's sources and limits).
func (f *Filters) filterLogs(ctx context.Context, via jrpc.Handler, id string) (json.RawMessage, error) {
	st, err := f.store.Get(ctx, id)
	if errors.Is(err, ErrFilterGone) {
		return nil, errFilterNotFound
	}
	if err != nil {
		return nil, f.storeError(err)
	}
	if st.Kind != filterLogs {
		return nil, errFilterNotFound
	}
	return via.ServeRPC(ctx, &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getLogs",
		Params: json.RawMessage("[" + string(st.Crit) + "]")})
}

// jsonList builds a JSON array of raw members.
type jsonList struct{ b []byte }

func (l *jsonList) add(v []byte) {
	if l.b == nil {
		l.b = append(l.b, '[')
	} else {
		l.b = append(l.b, ',')
	}
	l.b = append(l.b, v...)
}

// addAll adds the members of the JSON array arr.
func (l *jsonList) addAll(arr []byte) {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 || arr[0] != '[' {
		return
	}
	inner := bytes.TrimSpace(arr[1 : len(arr)-1])
	if len(inner) == 0 {
		return
	}
	l.add(inner)
}

func (l *jsonList) json() json.RawMessage {
	if l.b == nil {
		return json.RawMessage("[]")
	}
	return append(l.b, ']')
}
