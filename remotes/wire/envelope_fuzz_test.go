package wire

import (
	"encoding/json"
	"testing"
)

// FuzzParseEnvelope feeds hostile upstream replies to the reply parser: it
// must never panic, and whatever it passes on as a result must be valid
// JSON, since venn forwards results byte for byte into its own answers.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":"0x1"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}`,
		`{"id":1,"result":{"a":[1,2,{"b":null}]},"error":null}`,
		`{"id":null,"error":{"code":-32700,"message":"parse error","data":"\u0000"}}`,
		"{\"id\":1,\"result\":\"\x12\"}", // a raw control character: not JSON
		`{"id":1,"result":}`, `{"id":1,"result":"\`, `[{"id":1}]`, ``, `{`, `{"id":1,"result":1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := parseEnvelope(data)
		if err != nil {
			return
		}
		_ = env.idIs(1)
		_ = env.idIsNull()
		res, err := env.outcome("fuzz", nil, 200)
		if err == nil && !json.Valid(res) {
			t.Fatalf("result %q of %q is not valid JSON", res, data)
		}
	})
}
