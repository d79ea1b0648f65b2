package emerald

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/jrpc"
)

// readAnswer hands a NativeCall item the answer's result byte for byte,
// or its error with code, message and data, as decoding it did.
func TestReadAnswer(t *testing.T) {
	tests := []struct {
		name       string
		give       string
		wantResult string
		wantErr    *jrpc.Error
	}{
		{name: "result", give: `{"jsonrpc":"2.0","id":1,"result":{"number":"0x10", "hash":"0xab","txs":[1, "a\"}"]}}`,
			wantResult: `{"number":"0x10", "hash":"0xab","txs":[1, "a\"}"]}`},
		{name: "result first", give: ` {"result":"0x1","id":1,"jsonrpc":"2.0"}`, wantResult: `"0x1"`},
		{name: "null result", give: `{"jsonrpc":"2.0","id":1,"result":null}`, wantResult: `null`},
		{name: "error", give: `{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}`,
			wantErr: &jrpc.Error{Code: 3, Message: "execution reverted", Data: []byte(`"0x08c379a0"`)}},
		{name: "null error", give: `{"jsonrpc":"2.0","id":1,"error":null,"result":"0x2"}`, wantResult: `"0x2"`},
		{name: "not an object", give: `[{"jsonrpc":"2.0","id":1,"result":"0x1"}]`,
			wantErr: &jrpc.Error{Code: jrpc.CodeInternal, Message: "answer is not a JSON-RPC response"}},
		{name: "error not an object", give: `{"jsonrpc":"2.0","id":1,"error":"bad"}`,
			wantErr: &jrpc.Error{Code: jrpc.CodeInternal, Message: "answer is not a JSON-RPC response"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			result, callErr := readAnswer([]byte(tt.give))
			if string(result) != tt.wantResult {
				t.Errorf("result %s, want %s", result, tt.wantResult)
			}
			switch {
			case tt.wantErr == nil && callErr != nil:
				t.Errorf("error %+v, want none", callErr)
			case tt.wantErr != nil && (callErr == nil || callErr.Code != tt.wantErr.Code ||
				callErr.Message != tt.wantErr.Message || string(callErr.Data) != string(tt.wantErr.Data)):
				t.Errorf("error %+v, want %+v", callErr, tt.wantErr)
			}
		})
	}
}

// A stream or Describe the edge refuses ends with NativeCall's status for
// the refusal, the wait a Retry-After would have told in its message; a
// refusal over another limit (a tenant's credit budget) is
// RESOURCE_EXHAUSTED too.
func TestRefusedStatus(t *testing.T) {
	tests := []struct {
		name string
		give *jrpc.Refusal
		code codes.Code
		msg  string
	}{
		{name: "admitted", code: codes.OK},
		{name: "rate limited", give: &jrpc.Refusal{Status: 429, RetryAfter: "3",
			Err: &jrpc.Error{Code: jrpc.CodeRateLimited, Message: "rate limited", Data: []byte(`{"retry_after_ms":2500}`)}},
			code: codes.ResourceExhausted, msg: "rate limited (JSON-RPC -32055); retry after 3 s"},
		{name: "over a credit budget", give: &jrpc.Refusal{Status: 429, RetryAfter: "20",
			Err: &jrpc.Error{Code: -32005, Message: "credit budget exceeded: tenant t has spent its minutely budget of 10 credits; it resets at 2026-12-06T10:31:00Z"}},
			code: codes.ResourceExhausted, msg: "credit budget exceeded: tenant t has spent its minutely budget of 10 credits; it resets at 2026-12-06T10:31:00Z (JSON-RPC -32005); retry after 20 s"},
		{name: "no key", give: &jrpc.Refusal{Status: 401, Err: &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: missing API key"}},
			code: codes.Unauthenticated, msg: "unauthorized: missing API key (JSON-RPC -32056)"},
		{name: "another refusal", give: &jrpc.Refusal{Status: 403, Err: &jrpc.Error{Code: -32000, Message: "no"}},
			code: codes.PermissionDenied, msg: "no (JSON-RPC -32000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := status.FromError(refusedStatus(tt.give))
			if st.Code() != tt.code || st.Message() != tt.msg {
				t.Errorf("refusedStatus = %v %q, want %v %q", st.Code(), st.Message(), tt.code, tt.msg)
			}
			// NativeCall's own, from the error alone (the wait from its
			// data), where it refuses the request as a whole.
			if tt.give == nil {
				return
			}
			if err := refusal(tt.give.Err); err != nil {
				if nc, _ := status.FromError(err); nc.Code() != st.Code() || nc.Message() != st.Message() {
					t.Errorf("NativeCall's refusal = %v %q, want %v %q", nc.Code(), nc.Message(), st.Code(), st.Message())
				}
			}
		})
	}
}
