package remotes

import (
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/crypto/kzg4844"
	"github.com/holiman/uint256"
)

// The hash venn answers for "already known" must be the one the network
// knows the transaction by: for a blob transaction sent with its sidecar
// that is not keccak of the bytes sent.
func TestTxHash(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer := types.LatestSignerForChainID(big.NewInt(1))
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	dynamic := types.MustSignNewTx(key, signer, &types.DynamicFeeTx{
		ChainID: big.NewInt(1), Nonce: 7, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &to, Value: big.NewInt(1),
	})
	blob := types.MustSignNewTx(key, signer, &types.BlobTx{
		ChainID: uint256.NewInt(1), Nonce: 8, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(2), Gas: 21000, To: to,
		BlobFeeCap: uint256.NewInt(1), BlobHashes: []common.Hash{{0x01}},
		Sidecar: types.NewBlobTxSidecar(types.BlobSidecarVersion0, []kzg4844.Blob{{}}, []kzg4844.Commitment{{}}, []kzg4844.Proof{{}}),
	})
	legacy := types.MustSignNewTx(key, types.HomesteadSigner{}, &types.LegacyTx{Nonce: 9, GasPrice: big.NewInt(1), Gas: 21000, To: &to})

	for _, tt := range []struct {
		name string
		tx   *types.Transaction
	}{{"dynamic fee", dynamic}, {"blob with sidecar", blob}, {"legacy", legacy}} {
		raw, err := tt.tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		params, _ := json.Marshal([]string{hexutil.Encode(raw)})
		got := string(txHash(params))
		if want := `"` + tt.tx.Hash().Hex() + `"`; got != want {
			t.Errorf("%s: txHash = %s, want %s", tt.name, got, want)
		}
	}
	for _, bad := range []string{`[]`, `["0x"]`, `["0xzz"]`, `{}`} {
		if h := txHash(json.RawMessage(bad)); h != nil {
			t.Errorf("txHash(%s) = %s, want nil", bad, h)
		}
	}
}
