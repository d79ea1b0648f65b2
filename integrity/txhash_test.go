package integrity

import (
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

func TestSentTxHash(t *testing.T) {
	const raw = "0x02f86b0180843b9aca00850df8475800825208940000000000000000000000000000000000000001880de0b6b3a764000080c0"
	tests := []struct {
		give   string
		want   string
		wantOK bool
	}{
		{`["` + raw + `"]`, crypto.Keccak256Hash(common.FromHex(raw)).Hex(), true},
		{`["0xdeadbeef"]`, crypto.Keccak256Hash([]byte{0xde, 0xad, 0xbe, 0xef}).Hex(), true}, // not decodable: hashed whole
		{`[]`, "", false},
		{`["0x"]`, "", false},
		{`["nothex"]`, "", false},
		{`{"a":1}`, "", false},
	}
	for _, tt := range tests {
		got, ok := SentTxHash(json.RawMessage(tt.give))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("SentTxHash(%s) = %q, %v; want %q, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}
