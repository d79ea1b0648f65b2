package evm

import (
	"encoding/json"
	"errors"
)

// LogRange is the block span of one eth_getLogs filter, resolved against a
// head. A filter by blockHash has no range.
type LogRange struct {
	From, To BlockRef
	ByHash   bool
}

// ParseLogRange reads fromBlock/toBlock/blockHash of an eth_getLogs filter
// (the first positional param).
func ParseLogRange(params json.RawMessage) (LogRange, error) {
	raw := Param(params, 0)
	if raw == nil {
		return LogRange{}, errors.New("missing filter")
	}
	var f struct {
		FromBlock json.RawMessage `json:"fromBlock"`
		ToBlock   json.RawMessage `json:"toBlock"`
		BlockHash json.RawMessage `json:"blockHash"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return LogRange{}, err
	}
	if len(f.BlockHash) > 0 && string(f.BlockHash) != "null" {
		return LogRange{ByHash: true}, nil
	}
	from, err := ParseBlockRef(f.FromBlock)
	if err != nil {
		return LogRange{}, err
	}
	to, err := ParseBlockRef(f.ToBlock)
	if err != nil {
		return LogRange{}, err
	}
	return LogRange{From: from, To: to}, nil
}

// WithRange returns the filter in params with fromBlock and toBlock replaced
// by the given numbers, every other field kept as sent.
func WithRange(params json.RawMessage, from, to uint64) (json.RawMessage, error) {
	raw := Param(params, 0)
	if raw == nil {
		return nil, errors.New("missing filter")
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, errors.New("filter is not an object")
	}
	f["fromBlock"] = json.RawMessage(`"` + Quantity(from) + `"`)
	f["toBlock"] = json.RawMessage(`"` + Quantity(to) + `"`)
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+2)
	out = append(out, '[')
	out = append(out, b...)
	return append(out, ']'), nil
}
