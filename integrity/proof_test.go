package integrity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/venn-gateway/venn/internal/simnode"
)

// storeTwo is the init code of a contract that stores 42 in slot 0 and 7
// in slot 1, with the two-byte runtime code 0x6000.
var storeTwo = common.FromHex("602a600055" + "6007600155" + "616000600052" + "6002601ef3")

// rpc is node's answer to one call.
func rpc(t testing.TB, url, method, params string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error != nil {
		t.Fatalf("%s%s: %s %v", method, params, out.Error, err)
	}
	return out.Result
}

// TestVerifyProofAgainstGeth: for every provable method, go-ethereum's
// own eth_getProof verifies against the block's state root, and geth's
// answer to the method agrees with what it proves, byte for byte where the
// proof holds the value; an EOA, a contract, an account no trie holds, a
// slot never written.
func TestVerifyProofAgainstGeth(t *testing.T) {
	node := simnode.Start(t)
	contract := node.Deploy(t, storeTwo)
	head := node.Head(t)
	hash := head.Hash().Hex()
	at := `{"blockHash":"` + hash + `"}`
	absent := "0x00000000000000000000000000000000000000aa"
	tests := []struct{ method, params string }{
		{"eth_getBalance", `["` + node.From().Hex() + `",` + at + `]`},
		{"eth_getTransactionCount", `["` + node.From().Hex() + `",` + at + `]`},
		{"eth_getCode", `["` + node.From().Hex() + `",` + at + `]`},
		{"eth_getStorageAt", `["` + node.From().Hex() + `","0x0",` + at + `]`},
		{"eth_getBalance", `["` + contract.Hex() + `",` + at + `]`},
		{"eth_getTransactionCount", `["` + contract.Hex() + `",` + at + `]`},
		{"eth_getCode", `["` + contract.Hex() + `",` + at + `]`},
		{"eth_getStorageAt", `["` + contract.Hex() + `","0x0",` + at + `]`},
		{"eth_getStorageAt", `["` + contract.Hex() + `","0x1",` + at + `]`},
		{"eth_getStorageAt", `["` + contract.Hex() + `","0x0000000000000000000000000000000000000000000000000000000000000005",` + at + `]`},
		{"eth_getBalance", `["` + absent + `",` + at + `]`},
		{"eth_getCode", `["` + absent + `",` + at + `]`},
		{"eth_getStorageAt", `["` + absent + `","0x1",` + at + `]`},
		{"eth_getProof", `["` + contract.Hex() + `",["0x0","0x1","0x05"],` + at + `]`},
		{"eth_getProof", `["` + absent + `",["0x01"],` + at + `]`},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.params[:12], func(t *testing.T) {
			q, ok := ReadStateQuery(tt.method, json.RawMessage(tt.params))
			if !ok {
				t.Fatalf("%s%s does not read", tt.method, tt.params)
			}
			proof := rpc(t, node.HTTPURL(), "eth_getProof", string(ProofParams(q, hash)))
			p, err := VerifyProof(head.Root, q, proof)
			if err != nil {
				t.Fatalf("geth's proof: %v", err)
			}
			if p.Claims != nil {
				t.Fatalf("geth's proof states what it does not prove: %v", p.Claims)
			}
			res := rpc(t, node.HTTPURL(), tt.method, tt.params)
			if err := p.Agrees(tt.method, res); err != nil {
				t.Fatalf("geth's answer %s: %v", res, err)
			}
			if ans, ok := p.Answer(tt.method); ok && !bytes.Equal(ans, res) {
				t.Errorf("the proven answer is %s, geth's %s", ans, res)
			}
		})
	}
	// The contract's values are what it stored.
	q, _ := ReadStateQuery("eth_getProof", json.RawMessage(`["`+contract.Hex()+`",["0x0","0x1"],"latest"]`))
	p, err := VerifyProof(head.Root, q, rpc(t, node.HTTPURL(), "eth_getProof", string(ProofParams(q, hash))))
	if err != nil || p.Slots[0] != common.BigToHash(big.NewInt(42)) || p.Slots[1] != common.BigToHash(big.NewInt(7)) {
		t.Fatalf("slots %v %v, want 42 and 7", p.Slots, err)
	}
}

// TestVerifyProofRefusesLies: a proof of another block's state, a node
// changed, another account's proof, a slot's proof missing, all fail; a
// proof that verifies but whose answer states another balance is caught
// by its claims; answers that are not the proven state disagree.
func TestVerifyProofRefusesLies(t *testing.T) {
	node := simnode.Start(t)
	contract := node.Deploy(t, storeTwo)
	before := node.Head(t)
	node.Send(t, contract, nil)
	node.Commit()
	head := node.Head(t)
	hash := head.Hash().Hex()
	q, _ := ReadStateQuery("eth_getProof", json.RawMessage(`["`+node.From().Hex()+`",["0x0"],"latest"]`))
	raw := rpc(t, node.HTTPURL(), "eth_getProof", string(ProofParams(q, hash)))
	var a map[string]json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	with := func(k, v string) json.RawMessage {
		m := map[string]json.RawMessage{}
		for kk, vv := range a {
			m[kk] = vv
		}
		m[k] = json.RawMessage(v)
		b, _ := json.Marshal(m)
		return b
	}
	var nodes []hexutil.Bytes
	if err := json.Unmarshal(a["accountProof"], &nodes); err != nil || len(nodes) == 0 {
		t.Fatalf("account proof %s", a["accountProof"])
	}
	flipped := append(hexutil.Bytes(nil), nodes[len(nodes)-1]...)
	flipped[len(flipped)-1] ^= 1
	changed, _ := json.Marshal(append(append([]hexutil.Bytes(nil), nodes[:len(nodes)-1]...), flipped))
	other, _ := ReadStateQuery("eth_getBalance", json.RawMessage(`["`+contract.Hex()+`","latest"]`))
	other.Slots = q.Slots

	bad := []struct {
		name  string
		root  common.Hash
		q     StateQuery
		proof json.RawMessage
	}{
		{"another block's root", before.Root, q, raw},
		{"a node changed", head.Root, q, with("accountProof", string(changed))},
		{"no nodes", head.Root, q, with("accountProof", `[]`)},
		{"another account", head.Root, other, raw},
		{"a slot's proof missing", head.Root, q, with("storageProof", `[]`)},
		{"not JSON", head.Root, q, json.RawMessage(`"0x1"`)},
	}
	for _, tt := range bad {
		if _, err := VerifyProof(tt.root, tt.q, tt.proof); !errors.Is(err, ErrBadProof) {
			t.Errorf("%s: %v, want ErrBadProof", tt.name, err)
		}
	}
	p, err := VerifyProof(head.Root, q, with("balance", `"0x1"`))
	if err != nil || !errors.Is(p.Claims, ErrStateMismatch) {
		t.Errorf("a proof stating another balance: %v, claims %v", err, p.Claims)
	}
	p, err = VerifyProof(head.Root, q, raw)
	if err != nil || p.Claims != nil {
		t.Fatal(err, p.Claims)
	}
	for _, tt := range []struct{ method, res string }{
		{"eth_getBalance", `"0x1"`},
		{"eth_getTransactionCount", `"0x0"`},
		{"eth_getCode", `"0x6000"`},
		{"eth_getStorageAt", `"0x0000000000000000000000000000000000000000000000000000000000000001"`},
		{"eth_getBalance", `null`},
	} {
		if err := p.Agrees(tt.method, json.RawMessage(tt.res)); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("%s answered %s: %v, want ErrStateMismatch", tt.method, tt.res, err)
		}
	}
	if err := p.Agrees("eth_getTransactionCount", json.RawMessage(fmt.Sprintf(`"%#x"`, p.Account.Nonce))); err != nil {
		t.Errorf("the true nonce: %v", err)
	}
}

// BenchmarkVerifyProof: the CPU of one proof check, an account's proof
// and one slot's, from go-ethereum.
func BenchmarkVerifyProof(b *testing.B) {
	node := simnode.Start(b)
	contract := node.Deploy(b, storeTwo)
	head := node.Head(b)
	q, _ := ReadStateQuery("eth_getStorageAt", json.RawMessage(`["`+contract.Hex()+`","0x1","latest"]`))
	proof := rpc(b, node.HTTPURL(), "eth_getProof", string(ProofParams(q, head.Hash().Hex())))
	res := json.RawMessage(`"0x0000000000000000000000000000000000000000000000000000000000000007"`)
	b.ReportAllocs()
	for b.Loop() {
		p, err := VerifyProof(head.Root, q, proof)
		if err != nil || p.Agrees("eth_getStorageAt", res) != nil {
			b.Fatal(err)
		}
	}
}
