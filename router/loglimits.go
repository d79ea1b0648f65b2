package router

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/venn-gateway/venn/evm"
)

// LogLimits cap what one client's eth_getLogs may ask of a chain. A call
// past one is answered at once, before any source (head window, history,
// remotes) is asked, with geth's wording so that a client that narrows its
// query on geth's errors narrows it here too.
type LogLimits struct {
	// MaxBlockRange caps the blocks of one call's range (toBlock - fromBlock
	// + 1, tags read against the cluster's head); 0: no cap, venn splits
	// what its remotes cannot take in one call.
	MaxBlockRange uint64 `yaml:"max_block_range"`
	// MaxAddresses caps the addresses of one filter.
	MaxAddresses int `yaml:"max_addresses"`
	// MaxTopics caps the alternatives at one topic position.
	MaxTopics int `yaml:"max_topics"`
}

// WithDefaults fills the zero caps: geth's own limits on addresses and
// topic alternatives (evm.LogQueryLimit, the default of logs
// subscriptions' too), no cap on the range.
func (l LogLimits) WithDefaults() LogLimits {
	if l.MaxAddresses == 0 {
		l.MaxAddresses = evm.LogQueryLimit
	}
	if l.MaxTopics == 0 {
		l.MaxTopics = evm.LogQueryLimit
	}
	return l
}

// Validate reports the limits' problems, each naming its field
// (max_addresses). It checks them as they will be in force, defaulted: a
// zero cap is geth's.
func (l LogLimits) Validate() error {
	l = l.WithDefaults()
	var errs []error
	// venn reads a filter as geth does, and geth refuses more than
	// evm.LogQueryLimit of either: a higher cap could not be counted.
	for _, f := range []struct {
		name string
		v    int
	}{{"max_addresses", l.MaxAddresses}, {"max_topics", l.MaxTopics}} {
		if f.v < 1 || f.v > evm.LogQueryLimit {
			errs = append(errs, fmt.Errorf("%s: must be 1 to %d (geth's own limit; 0 or absent is %[2]d), not %d",
				f.name, evm.LogQueryLimit, f.v))
		}
	}
	return errors.Join(errs...)
}

// SetLogLimits puts l (defaulted) in force, for a configuration reload.
func (rt *Router) SetLogLimits(l LogLimits) {
	l = l.WithDefaults()
	rt.logLimits.Store(&l)
}

// checkFilter refuses an eth_getLogs or eth_newFilter past the chain's
// limits. ParseCall read both filters alike.
func (rt *Router) checkFilter(c *evm.Call) error {
	switch c.Method {
	case "eth_getLogs":
		return rt.checkLogs(c, true)
	case "eth_newFilter":
		return rt.checkLogs(c, false)
	}
	return nil
}

// checkLogs refuses an eth_getLogs past the chain's limits; without
// withRange, a filter past its address and topic caps (eth_newFilter, which
// geth holds to those when it reads the filter: its range is asked only by
// eth_getFilterLogs, and a filter polled by eth_getFilterChanges from an old
// fromBlock is sent only what is new).
func (rt *Router) checkLogs(c *evm.Call, withRange bool) error {
	l := rt.logLimits.Load()
	addrs, topics := filterCounts(c)
	if addrs > l.MaxAddresses {
		return logQueryLimit(fmt.Sprintf("%d addresses, getlogs_limits.max_addresses is %d", addrs, l.MaxAddresses))
	}
	for i, n := range topics {
		if n > l.MaxTopics {
			return logQueryLimit(fmt.Sprintf("%d topics at position %d, getlogs_limits.max_topics is %d", n, i, l.MaxTopics))
		}
	}
	if !withRange || l.MaxBlockRange == 0 || !c.RangeOK || c.Range.ByHash {
		return nil
	}
	from, okFrom := rt.resolveTag(c.Range.From)
	to, okTo := rt.resolveTag(c.Range.To)
	if !okFrom || !okTo || to < from {
		return nil // the node's to answer: an unknown tag, or an invalid range
	}
	if span := to - from; span >= l.MaxBlockRange {
		// geth's --rpc.rangelimit wording, which clients and venn's own
		// classifier read the cap from.
		return &limitError{msg: fmt.Sprintf(
			"exceed maximum block range: %d (asked for %d blocks)", l.MaxBlockRange, span+1)}
	}
	return nil
}

// filterCounts are the addresses of c's filter and the alternatives at
// each topic position. A filter evm read exactly has them counted; one it
// did not (past geth's own limits, which some providers lift) is counted
// here, so that a cap holds for it too: the params are bounded by the
// request's size.
func filterCounts(c *evm.Call) (addrs int, topics []int) {
	if c.Exact {
		f := &c.Filter
		topics = make([]int, f.NTopics)
		for i := range f.NTopics {
			topics[i] = f.Topics[i].Len()
		}
		return f.Address.Len(), topics
	}
	var f struct {
		Address json.RawMessage   `json:"address"`
		Topics  []json.RawMessage `json:"topics"`
	}
	if json.Unmarshal(evm.Param(c.Params, 0), &f) != nil {
		return 0, nil // the node's to refuse
	}
	count := func(raw json.RawMessage) int {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return 0 // one value, or none
		}
		return len(list)
	}
	topics = make([]int, len(f.Topics))
	for i, t := range f.Topics {
		topics[i] = count(t)
	}
	return count(f.Address), topics
}

// logQueryLimit is geth's error for a filter over its --rpc.logquerylimit,
// with what was over.
func logQueryLimit(detail string) error {
	return &limitError{msg: evm.ErrLogQueryLimit + ": " + detail}
}

// resolveTag reads a range end as a number against the cluster's head
// (absent is latest); false when it cannot be pinned.
func (rt *Router) resolveTag(ref evm.BlockRef) (uint64, bool) {
	switch ref.Kind {
	case evm.RefNumber:
		return ref.Number, true
	case evm.RefEarliest:
		return 0, true
	}
	var tags struct{ latest, safe, finalized uint64 }
	if rt.head != nil {
		if t, ok := rt.head.Tags(); ok {
			tags.latest, tags.safe, tags.finalized = t.Latest, t.Safe, t.Finalized
		}
	}
	if tags.latest == 0 {
		tags.latest = rt.up.HealthyHead()
	}
	var n uint64
	switch ref.Kind {
	case evm.RefNone, evm.RefLatest, evm.RefPending:
		n = tags.latest
	case evm.RefSafe:
		n = tags.safe
	case evm.RefFinalized:
		n = tags.finalized
	}
	return n, n > 0
}
