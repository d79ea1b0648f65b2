package getlogs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// capped is a Sender over one remote that refuses ranges wider than max
// blocks and answers one log per block, its logIndex the block number.
type capped struct {
	max        uint64
	cuts, sent atomic.Int64
}

func (c *capped) Part(_ context.Context, params json.RawMessage, need, span uint64) (json.RawMessage, error) {
	c.sent.Add(1)
	if span > c.max {
		return nil, &TooLarge{Reason: verdict.ReasonRangeTooLarge, Err: errors.New("range too large")}
	}
	from := need - span + 1
	logs := make([]string, 0, span)
	for n := from; n <= need; n++ {
		logs = append(logs, fmt.Sprintf(`{"blockNumber":"%s","logIndex":"%s"}`, evm.Quantity(n), evm.Quantity(n)))
	}
	return json.RawMessage("[" + strings.Join(logs, ",") + "]"), nil
}

func (c *capped) Cut() { c.cuts.Add(1) }

// TestSplitRun: a range is answered in order through parts the remote
// takes, re-split after a too-large answer, within the split's bounds.
func TestSplitRun(t *testing.T) {
	params := json.RawMessage(`[{"fromBlock":"0x1","toBlock":"0x14"}]`)
	tests := []struct {
		name     string
		max      uint64
		chunk    uint64
		maxParts uint64
		wantLogs int
		wantCode int
	}{
		{name: "parts fit", max: 5, chunk: 5, maxParts: 10, wantLogs: 20},
		{name: "parts re-split", max: 3, chunk: 10, maxParts: 20, wantLogs: 20},
		{name: "too many parts", max: 1, chunk: 1, maxParts: 10, wantCode: jrpc.CodeLimitExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send := &capped{max: tt.max}
			s := New(send, params, 1, 20, Limits{Concurrency: 2, MaxParts: tt.maxParts, MaxBytes: 1 << 20})
			res, err := s.Run(context.Background(), 1, 20, tt.chunk)
			if tt.wantCode != 0 {
				var ec interface{ ErrorCode() int }
				if !errors.As(err, &ec) || ec.ErrorCode() != tt.wantCode {
					t.Fatalf("err %v, want code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var logs []struct{ LogIndex string }
			if err := json.Unmarshal(res, &logs); err != nil || len(logs) != tt.wantLogs {
				t.Fatalf("%d logs (%v), want %d", len(logs), err, tt.wantLogs)
			}
			for i, l := range logs {
				if l.LogIndex != evm.Quantity(uint64(i+1)) {
					t.Fatalf("log %d has index %s: out of order", i, l.LogIndex)
				}
			}
			if send.cuts.Load() == 0 {
				t.Error("no cut counted")
			}
		})
	}
}

func TestSpans(t *testing.T) {
	tests := []struct{ give, suggested, want uint64 }{
		{give: 100, suggested: 0, want: 50},
		{give: 100, suggested: 30, want: 30},
		{give: 100, suggested: 200, want: 50},
		{give: 1, suggested: 0, want: 1},
	}
	for _, tt := range tests {
		if got := NextSpan(tt.give, tt.suggested); got != tt.want {
			t.Errorf("NextSpan(%d, %d) = %d, want %d", tt.give, tt.suggested, got, tt.want)
		}
	}
	if got := Span(0, ^uint64(0)); got != ^uint64(0) {
		t.Errorf("Span of the whole range = %d, want saturated", got)
	}
}
