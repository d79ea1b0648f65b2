package integrity

import (
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// SentTxHash is the hash of the raw transaction in eth_sendRawTransaction's
// params (0x-prefixed hex); false when params hold none. The hash is not
// always keccak(raw): a blob transaction is sent in its network form (with
// blobs, commitments and proofs), whose hash covers only the transaction,
// so the bytes are decoded first. What go-ethereum does not decode is
// hashed whole, as the node does every form but that one.
func SentTxHash(params json.RawMessage) (string, bool) {
	var args []string
	if err := json.Unmarshal(params, &args); err != nil || len(args) == 0 {
		return "", false
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(args[0], "0x"), "0X"))
	if err != nil || len(raw) == 0 {
		return "", false
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return crypto.Keccak256Hash(raw).Hex(), true
	}
	return tx.Hash().Hex(), true
}
