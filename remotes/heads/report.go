package heads

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// Report is one head a remote reported: a poll of its latest block, a
// newHeads notification, or the cluster's feed. It is immutable once
// stored.
type Report struct {
	Number uint64
	Hash   string
	Parent string
	Time   uint64    // the block's timestamp, unix seconds
	Seen   time.Time // when this remote first reported this block
}

// ParseReport reads a block or header (eth_getBlockByNumber's result,
// a newHeads notification's) as a head report.
func ParseReport(raw []byte) (*Report, error) {
	var b struct {
		Number    string `json:"number"`
		Hash      string `json:"hash"`
		Parent    string `json:"parentHash"`
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	num, ok := hexUint(b.Number)
	if !ok {
		return nil, errors.New("head number is not a hex quantity")
	}
	ts, ok := hexUint(b.Timestamp)
	if !ok {
		return nil, errors.New("head timestamp is not a hex quantity")
	}
	if !isHash(b.Hash) || !isHash(b.Parent) {
		return nil, errors.New("head hash is not a 32-byte hex hash")
	}
	return &Report{Number: num, Hash: b.Hash, Parent: b.Parent, Time: ts}, nil
}

func isHash(s string) bool {
	if len(s) != evm.HashLen || s[:2] != "0x" {
		return false
	}
	for _, c := range s[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hexUint(s string) (uint64, bool) {
	if len(s) < 3 || len(s) > 18 || (s[:2] != "0x" && s[:2] != "0X") {
		return 0, false
	}
	n, err := strconv.ParseUint(s[2:], 16, 64)
	return n, err == nil
}
