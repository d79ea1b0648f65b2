package remotes

import (
	"fmt"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/side"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// The pool's own errors reach clients through jrpc.ToWire with their code,
// message and data, also when wrapped (the forger wraps what it asked the
// pool), and read to the classifier as the wire error they make.
func TestPoolErrorsOnTheWire(t *testing.T) {
	tests := []struct {
		name string
		give error
		want jrpc.Error
	}{
		{"no remote", &noRemoteError{method: "eth_call", chain: "c", remotes: []RemoteReason{}},
			jrpc.Error{Code: jrpc.CodeNoRemote, Message: "no remote available for eth_call on c", Data: []byte(`{"remotes":[]}`)}},
		{"all failed", &noRemoteError{method: "eth_call", chain: "c", tried: 2, last: verdict.ReasonTimeout},
			jrpc.Error{Code: jrpc.CodeNoRemote, Message: "all 2 remote(s) tried failed for eth_call on c (last: timeout)", Data: []byte(`{"remotes":null}`)}},
		{"group failed", &side.GroupError{Method: "eth_sendRawTransaction", Chain: "c", Group: "private", Tried: 1, Last: "none"},
			jrpc.Error{Code: jrpc.CodeNoRemote, Message: "all 1 remote(s) of group private failed for eth_sendRawTransaction on c (last: none); not sent to public remotes"}},
		{"timeout", &timeoutError{msg: "request timed out after trying 1 remote(s)"},
			jrpc.Error{Code: jrpc.CodeTimeout, Message: "request timed out after trying 1 remote(s)"}},
		{"reply too large", errReplyTooLarge(1 << 20),
			jrpc.Error{Code: jrpc.CodeLimitExceeded, Message: "answer too large: the remote's reply exceeds max_response_bytes (1048576 bytes)"}},
		{"disagree", &disagreeError{method: "eth_call", agree: 2, voters: 3, answers: 3},
			jrpc.Error{Code: jrpc.CodeRemotesDisagree, Message: "remotes disagree on eth_call: no answer was given by 2 remote(s); 3 answered with 3 different answer(s)"}},
		{"unavailable, local", jrpc.Local(&unavailableError{chain: "c", kind: KindState, block: 100, oldest: 900}),
			jrpc.Error{Code: jrpc.CodeBlockUnavailable, Message: "state at block 100 is not available on c: the oldest block any remote serves is 900",
				Data: []byte(`{"block":100,"oldest_available":900,"kind":"state"}`)}},
		{"unserved", &unservedError{method: "eth_foo"},
			jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method eth_foo does not exist/is not available"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, err := range []error{tt.give, fmt.Errorf("eth_getBlockReceipts(0x1): %w", tt.give)} {
				got := jrpc.ToWire(err)
				if got.Code != tt.want.Code || got.Message != tt.want.Message || string(got.Data) != string(tt.want.Data) {
					t.Errorf("ToWire(%v) = %d %q %s, want %d %q %s", err, got.Code, got.Message, got.Data,
						tt.want.Code, tt.want.Message, tt.want.Data)
				}
				if v, w := verdict.Classify("eth_call", err), verdict.Classify("eth_call", got); v != w {
					t.Errorf("Classify(%v) = %+v, want %+v as for its wire error", err, v, w)
				}
			}
		})
	}
}
