package emerald

import (
	"testing"

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
