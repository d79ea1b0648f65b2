package fakenode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/venn-gateway/venn/jrpc"
)

// eth_getLogs limits.
const (
	// MaxLogResults caps one eth_getLogs answer. geth has no such cap; it
	// keeps a runaway test query from building gigabytes.
	MaxLogResults = 10_000
	maxTopics     = 4    // geth's maxTopics
	maxSubTopics  = 1000 // geth's maxSubTopics
	codeLimit     = -32005
)

var (
	errInvalidBlockRange = invalidParams("invalid block range params")
	errRangeIntoFuture   = invalidParams("block range extends beyond current head block")
	errPendingLogs       = invalidParams("pending logs are not supported")
	errUnknownBlock      = &jrpc.Error{Code: codeServer, Message: "unknown block"}
	errMaxLogsRange      = &jrpc.Error{Code: codeLimit, Message: "requested range exceeds maximum RPC range limit"}
	errTooManyLogs       = &jrpc.Error{Code: codeLimit, Message: "query returned more than " + strconv.Itoa(MaxLogResults) + " results"}
	errExceedMaxTopics   = errors.New("exceed max topics")
	errInvalidTopic      = errors.New("invalid topic(s)")
)

// logFilter selects logs by address and topics, as geth's filter does: an
// empty address list matches any address; each topic position is a
// wildcard (empty) or a list of alternatives; a log with fewer topics than
// positions never matches.
type logFilter struct {
	addresses []common.Address
	topics    [][]common.Hash
}

func (f *logFilter) match(t *tables, g uint64) bool {
	if len(f.addresses) > 0 {
		addr := t.contracts[t.contractOf(g)]
		found := false
		for _, a := range f.addresses {
			if a == addr {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	logTopics := [2]common.Hash{t.topic0s[t.topicOf(g)], t.senderTopics[senderOf(g)]}
	if len(f.topics) > len(logTopics) {
		return false
	}
	for i, alts := range f.topics {
		if len(alts) == 0 {
			continue
		}
		found := false
		for _, h := range alts {
			if h == logTopics[i] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// filterQuery is geth's FilterCriteria.
type filterQuery struct {
	logFilter
	blockHash *common.Hash
	from, to  *rpc.BlockNumber
}

// parseFilter decodes a filter object with geth's rules and error texts.
func parseFilter(data []byte) (*filterQuery, error) {
	var raw struct {
		BlockHash *common.Hash     `json:"blockHash"`
		FromBlock *rpc.BlockNumber `json:"fromBlock"`
		ToBlock   *rpc.BlockNumber `json:"toBlock"`
		Addresses any              `json:"address"`
		Topics    []any            `json:"topics"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	q := new(filterQuery)
	if raw.BlockHash != nil {
		if raw.FromBlock != nil || raw.ToBlock != nil {
			return nil, errors.New("cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other")
		}
		q.blockHash = raw.BlockHash
	} else {
		q.from, q.to = raw.FromBlock, raw.ToBlock
	}
	switch addrs := raw.Addresses.(type) {
	case nil:
	case []any:
		for i, a := range addrs {
			s, ok := a.(string)
			if !ok {
				return nil, fmt.Errorf("non-string address at index %d", i)
			}
			addr, err := decodeAddress(s)
			if err != nil {
				return nil, fmt.Errorf("invalid address at index %d: %v", i, err)
			}
			q.addresses = append(q.addresses, addr)
		}
	case string:
		addr, err := decodeAddress(addrs)
		if err != nil {
			return nil, fmt.Errorf("invalid address: %v", err)
		}
		q.addresses = []common.Address{addr}
	default:
		return nil, errors.New("invalid addresses in query")
	}
	if len(raw.Topics) > maxTopics {
		return nil, errExceedMaxTopics
	}
	if len(raw.Topics) > 0 {
		q.topics = make([][]common.Hash, len(raw.Topics))
	}
	for i, t := range raw.Topics {
		switch topic := t.(type) {
		case nil:
		case string:
			h, err := decodeTopic(topic)
			if err != nil {
				return nil, err
			}
			q.topics[i] = []common.Hash{h}
		case []any:
			if len(topic) > maxSubTopics {
				return nil, errExceedMaxTopics
			}
			for _, alt := range topic {
				if alt == nil {
					q.topics[i] = nil // a null alternative matches anything
					break
				}
				s, ok := alt.(string)
				if !ok {
					return nil, errInvalidTopic
				}
				h, err := decodeTopic(s)
				if err != nil {
					return nil, err
				}
				q.topics[i] = append(q.topics[i], h)
			}
		default:
			return nil, errInvalidTopic
		}
	}
	return q, nil
}

func decodeAddress(s string) (common.Address, error) {
	b, err := hexutil.Decode(s)
	if err == nil && len(b) != common.AddressLength {
		err = fmt.Errorf("hex has invalid length %d after decoding; expected %d for address", len(b), common.AddressLength)
	}
	return common.BytesToAddress(b), err
}

func decodeTopic(s string) (common.Hash, error) {
	b, err := hexutil.Decode(s)
	if err == nil && len(b) != common.HashLength {
		err = fmt.Errorf("hex has invalid length %d after decoding; expected %d for topic", len(b), common.HashLength)
	}
	return common.BytesToHash(b), err
}

// logRange resolves a filter to the block range it covers, with geth's
// checks in geth's order, plus the SetMaxLogsRange fault where geth checks
// its own --rpc.rangelimit.
func (n *Node) logRange(v *chainView, f *faults, q *filterQuery) (uint64, uint64, *jrpc.Error) {
	if q.blockHash != nil {
		num, ok := n.hasherOf(v).findBlock(v, *q.blockHash)
		if !ok {
			return 0, 0, errUnknownBlock
		}
		return num, num, nil
	}
	begin, end := rpc.LatestBlockNumber, rpc.LatestBlockNumber
	if q.from != nil {
		begin = *q.from
	}
	if q.to != nil {
		end = *q.to
	}
	if begin >= 0 && end >= 0 && begin > end {
		return 0, 0, errInvalidBlockRange
	}
	if begin == rpc.PendingBlockNumber || end == rpc.PendingBlockNumber {
		return 0, 0, errPendingLogs
	}
	first, last := n.resolve(v, begin), n.resolve(v, end)
	if f.maxLogs > 0 && last >= first && last-first+1 > f.maxLogs {
		return 0, 0, errMaxLogsRange
	}
	if first > last {
		return 0, 0, errInvalidBlockRange
	}
	if last > v.visible() {
		return 0, 0, errRangeIntoFuture
	}
	return first, last, nil
}

func (n *Node) getLogs(v *chainView, f *faults, params []byte) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	q, err := parseFilter(args[0])
	if err != nil {
		return nil, argErr(0, err)
	}
	first, last, rerr := n.logRange(v, f, q)
	if rerr != nil {
		return nil, rerr
	}
	buf := append(make([]byte, 0, 1024), '[')
	count, most := 0, MaxLogResults
	if f.maxResults > 0 {
		most = min(most, f.maxResults)
	}
	for num := max(first, 1); num <= last; num++ {
		var b *synthBlock // built only for blocks with a match
		for idx := 0; idx < txsPerBlock; idx++ {
			if !q.match(n.tables, num*txsPerBlock+uint64(idx)) {
				continue
			}
			if count++; count > most {
				return nil, &jrpc.Error{Code: codeLimit, Message: "query returned more than " + strconv.Itoa(most) + " results"}
			}
			if b == nil {
				b = n.block(v, num)
			}
			if count > 1 {
				buf = append(buf, ',')
			}
			buf = n.appendLog(buf, b, &b.txs[idx], false)
		}
	}
	return append(buf, ']'), nil
}
