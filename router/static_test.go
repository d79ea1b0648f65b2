package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/jrpc"
)

func staticFromYAML(t *testing.T, src string) []StaticAnswer {
	t.Helper()
	var list []StaticAnswer
	if err := yaml.Unmarshal([]byte(src), &list); err != nil {
		t.Fatal(err)
	}
	if err := ValidateStatic(list); err != nil {
		t.Fatal(err)
	}
	return list
}

func TestStaticAnswers(t *testing.T) {
	list := staticFromYAML(t, `
- method: net_version
  result: "1"
- method: web3_clientVersion
  result: venn/private-chain
- method: eth_getBalance
  params: ["0x00000000000000000000000000000000000000aa", latest]
  result: "0x0"
- method: eth_call
  params: [{to: "0x00000000000000000000000000000000000000bb", data: "0x01"}, latest]
  result: "0x2a"
- method: eth_call
  params: [{to: "0x00000000000000000000000000000000000000cc"}, latest]
  error: {code: 3, message: execution reverted, data: "0x08c379a0"}
- method: eth_feeHistory
  result: {oldestBlock: "0x1", baseFeePerGas: ["0x7"], gasUsedRatio: [0.5]}
`)
	rec := &recorder{}
	rt := New(Config{Chain: "private", ChainID: 1337, Static: list}, nil, rec, nil)
	tests := []struct {
		method, params string
		want           string // result, or "error CODE MESSAGE"
		forwarded      bool
	}{
		{"net_version", `[]`, `"1"`, false},
		{"net_version", ``, `"1"`, false},
		{"web3_clientVersion", `[]`, `"venn/private-chain"`, false},
		{"eth_getBalance", `["0x00000000000000000000000000000000000000aa","latest"]`, `"0x0"`, false},
		{"eth_getBalance", `[ "0x00000000000000000000000000000000000000aa" , "latest" ]`, `"0x0"`, false},
		{"eth_getBalance", `["0x00000000000000000000000000000000000000ab","latest"]`, `"0x10"`, true},
		{"eth_call", `[{"data":"0x01","to":"0x00000000000000000000000000000000000000bb"},"latest"]`, `"0x2a"`, false},
		{"eth_call", `[{"to":"0x00000000000000000000000000000000000000cc"},"latest"]`, `error 3 execution reverted`, false},
		{"eth_call", `[{"to":"0x00000000000000000000000000000000000000bb","data":"0x02"},"latest"]`, `"0x10"`, true},
		{"eth_feeHistory", `[4,"latest",[]]`, `{"baseFeePerGas":["0x7"],"gasUsedRatio":[0.5],"oldestBlock":"0x1"}`, false},
		{"eth_gasPrice", `[]`, `"0x10"`, true},
	}
	for _, tt := range tests {
		rec.sent = nil
		res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: tt.method, Params: json.RawMessage(tt.params)})
		got := string(res)
		var je *jrpc.Error
		if errors.As(err, &je) {
			got = "error " + itoa(je.Code) + " " + je.Message
			if string(je.Data) != `"0x08c379a0"` {
				t.Errorf("%s %s: error data %s", tt.method, tt.params, je.Data)
			}
		} else if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.params, err)
		}
		if got != tt.want {
			t.Errorf("%s %s = %s, want %s", tt.method, tt.params, got, tt.want)
		}
		if (len(rec.sent) > 0) != tt.forwarded {
			t.Errorf("%s %s: forwarded %v, want %v", tt.method, tt.params, len(rec.sent) > 0, tt.forwarded)
		}
	}

	// A reload replaces them; none at all answers nothing from config.
	rt.SetStaticAnswers(nil)
	rec.sent = nil
	if res, _ := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "net_version"}); string(res) != `"0x10"` || len(rec.sent) != 1 {
		t.Errorf("after the reload: net_version = %s, forwarded %d", res, len(rec.sent))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestStaticAnswersValidate(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"- method: net_version\n", "static_answers[0].result: required (or error)"},
		{"- result: 1\n", "static_answers[0].method: required"},
		{"- method: eth_subscribe\n  result: 1\n", "static_answers[0].method: eth_subscribe is served by subscriptions"},
		{"- method: m\n  result: 1\n  error: {code: 1, message: x}\n", "static_answers[0].result: set result or error, not both"},
		{"- method: m\n  params: 5\n  result: 1\n", "static_answers[0].params: must be a list or a map"},
		{"- method: m\n  error: {code: 1}\n", "static_answers[0].error.message: required"},
		{"- method: m\n  result: 1\n- method: m\n  result: 2\n", "static_answers[1].method: answers the same call as static_answers[0]"},
	}
	for _, tt := range tests {
		var list []StaticAnswer
		if err := yaml.Unmarshal([]byte(tt.give), &list); err != nil {
			t.Fatal(err)
		}
		err := ValidateStatic(list)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.give, err, tt.want)
		}
	}
}
