package evm

import (
	"encoding/json"
	"testing"
)

// FuzzParams feeds client params to everything venn reads of them: no input
// may panic, and a rewritten filter is valid JSON.
func FuzzParams(f *testing.F) {
	for _, s := range []string{
		`[{"fromBlock":"0x1","toBlock":"latest","address":["0x01"]}]`,
		`[{"blockHash":"0xab"}]`, `[null]`, `[]`, `["0x10",false]`, `[{"fromBlock":"0xffffffffffffffffff"}]`,
		`{"a":1}`, `["pending"]`, `[{"fromBlock":-1}]`,
		`[{"topics":[null,["0x00000000000000000000000000000000000000000000000000000000000000b1",null]]}]`,
		`[{"blockHash":"0x00000000000000000000000000000000000000000000000000000000000000b1","requireCanonical":true}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, m := range []string{"eth_call", "eth_getStorageAt", "eth_getBalance", "eth_getBlockReceipts"} {
			c := ParseCall(m, params)
			_, _ = c.Canonical()
		}
		_, _ = ParseBlockRef(Param(params, 0))
		_, _ = ParseBlockRef(Param(params, 1))
		var args [2][]byte
		if Args(params, args[:1]) {
			var f LogFilter
			if f.Parse(args[0]) && f.NTopics > MaxFilterTopics {
				t.Fatalf("LogFilter.Parse(%q) took %d topic positions", args[0], f.NTopics)
			}
			var key [HashLen]byte
			_, _ = ArgBlockNumberOrHash(args[0], &key)
			_, _ = ArgQuantity(args[0])
		}
		if _, err := ParseLogRange(params); err != nil || !json.Valid(params) {
			return
		}
		out, err := WithRange(params, 1, 2)
		if err == nil && !json.Valid(out) {
			t.Fatalf("WithRange(%q) = %q: not JSON", params, out)
		}
	})
}
