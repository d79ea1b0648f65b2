package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/wire"
)

// One judge decides what a reply means for every strategy: this is the
// table of its meanings, and of what it charges or learns on the way.
func TestJudge(t *testing.T) {
	upstream := func(code int, msg string) error {
		return &wire.UpstreamError{Remote: "a", HTTPStatus: 200, Err: &jrpc.Error{Code: code, Message: msg}}
	}
	notArray := func(json.RawMessage) error { return fmt.Errorf("%w: not an array", wire.ErrBadReply) }
	var verified int
	verifyFails := func(*Remote, json.RawMessage) error { verified++; return fmt.Errorf("%w: bad hash", wire.ErrBadReply) }
	tests := []struct {
		name        string
		method      string
		rt          route
		res         string
		err         error
		want        meaning
		wantGood    bool
		wantCharged bool   // a fault charged to the remote (its error rate moves)
		wantSpan    uint64 // a range cap learnt
		wantOver    bool
	}{
		{name: "result", method: "eth_getBalance", res: `"0x1"`, want: meanAnswer, wantGood: true},
		{name: "null is an answer", method: "eth_getBlockByNumber", res: `null`, want: meanAnswer, wantGood: true},
		{name: "null on a route that calls it missing", method: "eth_getBlockByNumber",
			rt: route{nullIsMissing: true}, res: `null`, want: meanMissing},
		{name: "result the check rejects", method: "eth_getLogs", rt: route{check: notArray},
			res: `{}`, want: meanFault, wantCharged: true},
		{name: "result verify rejects is not charged", method: "eth_getBlockByHash", rt: route{verify: verifyFails},
			res: `{}`, want: meanFault},
		{name: "revert", method: "eth_call", err: upstream(3, "execution reverted"), want: meanCaller, wantGood: true},
		{name: "caller left", method: "eth_call", err: fmt.Errorf("remote a: %w", context.Canceled), want: meanCut},
		{name: "deadline", method: "eth_call", err: fmt.Errorf("remote a: %w", context.DeadlineExceeded), want: meanFault},
		{name: "breaker open", method: "eth_call", err: fmt.Errorf("remote a: breaker open: %w", errLocalLimit), want: meanLocal},
		{name: "own rate limit", method: "eth_call", err: fmt.Errorf("remote a: %w", errOwnRateLimit), want: meanLocal},
		{name: "wrong chain", method: "eth_call", err: errWrongChain, want: meanLocal},
		{name: "5xx", method: "eth_call", err: &wire.HTTPStatusError{Remote: "a", Status: 503}, want: meanFault},
		{name: "range cap with span", method: "eth_getLogs",
			err:  upstream(-32600, "You can make eth_getLogs requests with up to a 500 block range. Based on your parameters, this block range should work: [0x1, 0x1f4]"),
			want: meanTooLarge, wantSpan: 500},
		{name: "range cap elsewhere is a fault", method: "eth_call",
			err:  upstream(-32600, "You can make eth_getLogs requests with up to a 500 block range."),
			want: meanFault},
		{name: "over venn's cap", method: "eth_call", err: &wire.ReplyTooLargeError{Remote: "a", Limit: 1 << 20},
			want: meanFault, wantOver: true},
		{name: "over venn's cap on eth_getLogs splits", method: "eth_getLogs", err: &wire.ReplyTooLargeError{Remote: "a", Limit: 1 << 20},
			want: meanTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPool(PoolConfig{Chain: "judge", ChainID: testChainID},
				[]Config{{Name: "a", URL: "http://127.0.0.1:9/a"}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Stop(context.Background()) })
			r := p.members()[0]
			a := p.newAttempt(tt.method, nil, tt.rt)
			jg := a.judge()
			var res json.RawMessage
			if tt.res != "" {
				res = json.RawMessage(tt.res)
			}
			j := jg.of(r, 0, res, tt.err)
			if j.mean != tt.want {
				t.Fatalf("meaning %d, want %d (err %v)", j.mean, tt.want, j.err)
			}
			if j.good() != tt.wantGood {
				t.Errorf("good %v, want %v", j.good(), tt.wantGood)
			}
			if charged := r.errorEWMA.Load() != 0; charged != tt.wantCharged {
				t.Errorf("charged %v, want %v", charged, tt.wantCharged)
			}
			if got := r.maxLogsSpan(); got != tt.wantSpan {
				t.Errorf("learnt span %d, want %d", got, tt.wantSpan)
			}
			if (j.over != nil) != tt.wantOver {
				t.Errorf("over cap %v, want %v", j.over, tt.wantOver)
			}
			var tl *tooLargeError
			if isTL := errors.As(j.err, &tl); isTL != (tt.want == meanTooLarge) {
				t.Errorf("err %v is a *tooLargeError: %v", j.err, isTL)
			}
		})
	}
	if verified != 1 {
		t.Errorf("verify called %d times, want once", verified)
	}
}
