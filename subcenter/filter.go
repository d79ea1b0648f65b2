package subcenter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// maxTopics is geth's bound on a filter's topic positions (eth/filters):
// a log has at most four topics.
const maxTopics = 4

var errInvalidBlockRange = errors.New("invalid block range params")

// errLogQueryLimit is geth's message for a filter over its
// --rpc.logquerylimit; clients that split their filters look for it.
const errLogQueryLimit = evm.ErrLogQueryLimit

// filterLimits bound what one logs filter may name.
type filterLimits struct {
	addresses int // max_filter_addresses
	topics    int // max_filter_topics: alternatives at one position
}

// limitError is a filter over one of venn's limits: -32052, not invalid
// params, since another server may take it.
type limitError struct{ msg string }

func (e *limitError) Error() string  { return e.msg }
func (e *limitError) ErrorCode() int { return jrpc.CodeLimitExceeded }

// logFilter is a logs subscription's criteria, read the way geth's
// FilterCriteria.UnmarshalJSON reads them and matched as eth_getLogs
// matches (evm.MatchTopics): the address is one of addrs (any when empty),
// which the subscriptions' index matches; each topic position is one of
// its alternatives (any when it has none); a log with fewer topics than
// positions does not match; from and to bound the block number when set.
type logFilter struct {
	addrs    []string        // lowercase
	topics   []evm.Criterion // the positions, trailing wildcards kept
	from, to uint64
	hasFrom  bool
	hasTo    bool
	// size is the filter's JSON as sent, in bytes: what it counts against
	// max_filter_bytes_per_connection.
	size int64
}

// matches is geth's filterLogs check for one log of block number n, but
// for the address, which the subscriptions' index matches.
func (f *logFilter) matches(l *evm.Log, n uint64) bool {
	if f.hasFrom && n < f.from || f.hasTo && n > f.to {
		return false
	}
	return evm.MatchTopics(f.topics, l.Topics)
}

// matchesAll is geth's filterLogs check for one log of block n.
func (lf *logFilter) matchesAll(l *evm.Log, n uint64) bool {
	if len(lf.addrs) > 0 {
		found := false
		for _, a := range lf.addrs {
			if a == l.Address {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return lf.matches(l, n)
}

// parseLogFilter reads a logs subscription's filter object. Its errors are
// geth's, as invalid-params messages, but for a *limitError when the
// filter names more addresses or topics than lim allows.
func parseLogFilter(raw json.RawMessage, lim filterLimits) (*logFilter, error) {
	var in struct {
		BlockHash *string          `json:"blockHash"`
		FromBlock *json.RawMessage `json:"fromBlock"`
		ToBlock   *json.RawMessage `json:"toBlock"`
		Addresses any              `json:"address"`
		Topics    []any            `json:"topics"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	f := &logFilter{size: int64(len(raw))}
	if in.BlockHash != nil {
		if in.FromBlock != nil || in.ToBlock != nil {
			return nil, errors.New("cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other")
		}
		if !isHex(*in.BlockHash, 32) {
			return nil, errors.New("hex string has length " + fmt.Sprint(len(*in.BlockHash)-2) + ", want 64 for common.Hash")
		}
	}
	var err error
	if f.from, f.hasFrom, err = boundary(in.FromBlock); err != nil {
		return nil, err
	}
	if f.to, f.hasTo, err = boundary(in.ToBlock); err != nil {
		return nil, err
	}
	// geth takes latest-to-latest, a number to a number, and a number to
	// latest; nothing else.
	if f.hasTo && (!f.hasFrom || f.to < f.from) {
		return nil, errInvalidBlockRange
	}
	if f.addrs, err = parseAddresses(in.Addresses, lim); err != nil {
		return nil, err
	}
	topics, err := parseTopics(in.Topics, lim)
	if err != nil {
		return nil, err
	}
	f.topics = evm.TopicCriteria(topics)
	// Trailing wildcards constrain nothing but the topic count, which
	// geth checks too: keep them.
	return f, nil
}

// parseAddresses reads a filter's address: one, a list, or none (nil).
func parseAddresses(addrs any, lim filterLimits) ([]string, error) {
	switch a := addrs.(type) {
	case nil:
	case string:
		if !isHex(a, 20) {
			return nil, errors.New("invalid address: hex string has length " + fmt.Sprint(len(a)-2) + ", want 40 for common.Address")
		}
		return []string{strings.ToLower(a)}, nil
	case []any:
		if len(a) > lim.addresses {
			return nil, &limitError{fmt.Sprintf("%s: %d addresses, limits.max_filter_addresses is %d",
				errLogQueryLimit, len(a), lim.addresses)}
		}
		out := make([]string, 0, len(a))
		for i, v := range a {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("non-string address at index %d", i)
			}
			if !isHex(s, 20) {
				return nil, fmt.Errorf("invalid address at index %d: hex string has length %d, want 40 for common.Address", i, len(s)-2)
			}
			out = append(out, strings.ToLower(s))
		}
		return out, nil
	default:
		return nil, errors.New("invalid addresses in query")
	}
	return nil, nil
}

// parseTopics reads a filter's topic positions, each nil for any.
func parseTopics(in []any, lim filterLimits) ([][]string, error) {
	if len(in) > maxTopics {
		return nil, errors.New("exceed max topics")
	}
	topics := make([][]string, len(in))
	for i, t := range in {
		switch t := t.(type) {
		case nil:
		case string:
			if !isHex(t, 32) {
				return nil, errors.New("invalid topic(s)")
			}
			topics[i] = []string{strings.ToLower(t)}
		case []any:
			if len(t) > lim.topics {
				return nil, &limitError{fmt.Sprintf("%s: %d topics at position %d, limits.max_filter_topics is %d",
					errLogQueryLimit, len(t), i, lim.topics)}
			}
			for _, v := range t {
				if v == nil {
					topics[i] = nil // a null alternative matches anything
					break
				}
				s, ok := v.(string)
				if !ok || !isHex(s, 32) {
					return nil, errors.New("invalid topic(s)")
				}
				topics[i] = append(topics[i], strings.ToLower(s))
			}
		default:
			return nil, errors.New("invalid topic(s)")
		}
	}
	return topics, nil
}

// boundary reads fromBlock or toBlock: a number bounds the subscription;
// latest (or absent) does not; pending is refused as geth refuses it.
func boundary(raw *json.RawMessage) (n uint64, set bool, err error) {
	if raw == nil {
		return 0, false, nil
	}
	ref, err := evm.ParseBlockRef(*raw)
	if err != nil {
		return 0, false, err
	}
	switch ref.Kind {
	case evm.RefNumber:
		if ref.Number > math.MaxInt64 {
			return 0, false, errors.New("block number larger than int64")
		}
		return ref.Number, true, nil
	case evm.RefNone, evm.RefLatest:
		return 0, false, nil
	case evm.RefEarliest:
		return 0, true, nil
	case evm.RefPending:
		return 0, false, errors.New("pending logs are not supported")
	default:
		return 0, false, errInvalidBlockRange
	}
}

func isHex(s string, n int) bool {
	if len(s) != 2+2*n || s[0] != '0' || s[1] != 'x' && s[1] != 'X' {
		return false
	}
	for i := 2; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
