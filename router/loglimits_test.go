package router

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// addrs is a JSON list of n distinct addresses.
func addrs(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf(`"0x%040x"`, i+1)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func TestLogLimitsRefuseBeforeAnyUpstreamCall(t *testing.T) {
	topic := func(i int) string { return fmt.Sprintf(`"0x%064x"`, i) }
	three := "[" + topic(1) + "," + topic(2) + "," + topic(3) + "]"
	tests := []struct {
		name   string
		give   string // the filter
		want   string // in the error; "" forwarded
		wantFw bool
	}{
		{"range within", `{"fromBlock":"0x1","toBlock":"0x64"}`, "", true},
		{"range over", `{"fromBlock":"0x1","toBlock":"0x65"}`, "exceed maximum block range: 100 (asked for 101 blocks)", false},
		{"from a number to latest", `{"fromBlock":"0x10"}`, "exceed maximum block range: 100 (asked for 1985 blocks)", false},
		{"latest alone", `{}`, "", true},
		{"from safe", `{"fromBlock":"safe"}`, "", true},
		{"from earliest", `{"fromBlock":"earliest","toBlock":"finalized"}`, "exceed maximum block range: 100 (asked for 1901 blocks)", false},
		{"by hash", `{"blockHash":"0x` + strings.Repeat("ab", 32) + `"}`, "", true},
		{"reversed is the node's", `{"fromBlock":"0x9","toBlock":"0x1"}`, "", true},
		{"addresses within", `{"address":` + addrs(3) + `}`, "", true},
		{"addresses over", `{"address":` + addrs(4) + `}`, "exceed max addresses or topics per search position: 4 addresses, getlogs_limits.max_addresses is 3", false},
		{"addresses past geth's own limit", `{"address":` + addrs(1001) + `}`, "exceed max addresses or topics per search position: 1001 addresses, getlogs_limits.max_addresses is 3", false},
		{"topics within", `{"topics":[null,[` + topic(1) + `,` + topic(2) + `]]}`, "", true},
		{"topics over", `{"topics":[null,` + three + `]}`, "exceed max addresses or topics per search position: 3 topics at position 1, getlogs_limits.max_topics is 2", false},
	}
	head := fakeHead{tags: headstore.Tags{Latest: 2000, Safe: 1950, Finalized: 1900}, ok: true}
	// eth_newFilter is held to the address and topic caps; its range is
	// eth_getFilterLogs's to ask, so any range goes.
	for _, method := range []string{"eth_getLogs", "eth_newFilter"} {
		for _, tt := range tests {
			if method == "eth_newFilter" && strings.HasPrefix(tt.want, "exceed maximum block range") {
				tt.want, tt.wantFw = "", true
			}
			t.Run(method+"/"+tt.name, func(t *testing.T) {
				rec := &recorder{}
				rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5,
					LogLimits: LogLimits{MaxBlockRange: 100, MaxAddresses: 3, MaxTopics: 2}}, head, rec, nil)
				_, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: method, Params: json.RawMessage("[" + tt.give + "]")})
				if fw := len(rec.sent) > 0; fw != tt.wantFw {
					t.Fatalf("forwarded %v, want %v (err %v)", fw, tt.wantFw, err)
				}
				if tt.want == "" {
					return
				}
				if je := jrpc.ToWire(err); je == nil || je.Code != jrpc.CodeLimitExceeded || je.Message != tt.want {
					t.Fatalf("error %v, want -32052 %q", err, tt.want)
				}
			})
		}
	}
}

func TestLogLimitsDefaultsAndReload(t *testing.T) {
	rec := &recorder{}
	rt := New(Config{Chain: "c", ChainID: 1}, fakeHead{tags: headstore.Tags{Latest: 2000}, ok: true}, rec, nil)
	params := json.RawMessage(`[{"fromBlock":"0x0","toBlock":"0x7cf","address":` + addrs(1000) + `}]`)
	if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getLogs", Params: params}); err != nil || len(rec.sent) != 1 {
		t.Fatalf("geth's own limits refused a filter within them: %v", err)
	}
	rt.SetLogLimits(LogLimits{MaxBlockRange: 1000})
	if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getLogs", Params: params}); err == nil || len(rec.sent) != 1 {
		t.Fatalf("a range cap set by reload did not hold: %v", err)
	}
}

func TestLogLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		give LogLimits
		want []string // none: valid
	}{
		{"zero is geth's", LogLimits{}, nil},
		{"in range", LogLimits{MaxBlockRange: 10, MaxAddresses: 1, MaxTopics: 1000}, nil},
		{"both out", LogLimits{MaxAddresses: 1001, MaxTopics: -1}, []string{
			"max_addresses: must be 1 to 1000 (geth's own limit; 0 or absent is 1000), not 1001",
			"max_topics: must be 1 to 1000 (geth's own limit; 0 or absent is 1000), not -1"}},
		{"zero beside a bad one", LogLimits{MaxTopics: -5}, []string{"max_topics: must be 1 to 1000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("want %q in %v", w, err)
				}
			}
			if err != nil && tt.give.MaxAddresses == 0 && strings.Contains(err.Error(), "max_addresses") {
				t.Errorf("a zero max_addresses reported: %v", err)
			}
		})
	}
}
