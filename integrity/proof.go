package integrity

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethdb/memorydb"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/ethereum/go-ethereum/trie"
	"github.com/holiman/uint256"
)

// StateQuery is what a state call reads: one account, and the storage
// slots of eth_getStorageAt or eth_getProof.
type StateQuery struct {
	Address common.Address
	Slots   []common.Hash
	// Keys are eth_getProof's storage keys as sent, which its answer
	// repeats; nil for the other methods.
	Keys []string
}

// ProvableMethods are the state calls a proof (eth_getProof) answers for.
var ProvableMethods = []string{"eth_getBalance", "eth_getTransactionCount", "eth_getCode", "eth_getStorageAt", "eth_getProof"}

// ReadStateQuery reads the account (and slots) of a provable call's params
// as geth reads them; ok is false for any other method and for params geth
// refuses.
func ReadStateQuery(method string, params json.RawMessage) (q StateQuery, ok bool) {
	var args []json.RawMessage
	if json.Unmarshal(params, &args) != nil || len(args) == 0 {
		return q, false
	}
	if q.Address.UnmarshalJSON(args[0]) != nil {
		return q, false
	}
	switch method {
	case "eth_getBalance", "eth_getTransactionCount", "eth_getCode":
		return q, true
	case "eth_getStorageAt":
		var s string
		if len(args) < 2 || json.Unmarshal(args[1], &s) != nil {
			return q, false
		}
		h, ok := storageKey(s)
		q.Slots = []common.Hash{h}
		return q, ok
	case "eth_getProof":
		if len(args) < 2 || json.Unmarshal(args[1], &q.Keys) != nil {
			return q, false
		}
		for _, k := range q.Keys {
			h, ok := storageKey(k)
			if !ok {
				return q, false
			}
			q.Slots = append(q.Slots, h)
		}
		return q, true
	}
	return q, false
}

// storageKey reads a storage key as geth's decodeStorageKey does: an
// optional 0x, odd lengths padded, at most 32 bytes.
func storageKey(s string) (common.Hash, bool) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		s = s[2:]
	}
	if len(s)&1 == 1 {
		s = "0" + s
	}
	b, err := hexutil.Decode("0x" + s)
	if err != nil || len(b) > common.HashLength {
		return common.Hash{}, false
	}
	return common.BytesToHash(b), true
}

// ProofParams are eth_getProof's params for q at the block with hash.
func ProofParams(q StateQuery, hash string) json.RawMessage {
	slots := q.Keys
	if slots == nil {
		slots = make([]string, len(q.Slots))
		for i, s := range q.Slots {
			slots[i] = s.Hex()
		}
	}
	b, _ := json.Marshal([]any{q.Address.Hex(), slots, map[string]string{"blockHash": hash}})
	return b
}

// Account is an account's state as its proof shows it; an account the
// trie does not hold is the empty account.
type Account struct {
	Exists      bool
	Nonce       uint64
	Balance     *uint256.Int
	CodeHash    common.Hash
	StorageRoot common.Hash
}

// Proven is what an eth_getProof answer proves against a state root.
type Proven struct {
	Account Account
	// Slots are the values of the query's slots, in its order.
	Slots []common.Hash
	// Claims is nil when every value the answer states (balance, nonce,
	// codeHash, storageHash, the storage values) is what its proof proves.
	Claims error
}

// ErrBadProof: an eth_getProof answer whose proof does not verify against
// the state root, or that does not prove what was asked.
var ErrBadProof = errors.New("the proof does not verify against the block's state root")

// ErrStateMismatch: an answer that is not what the block's state, as
// proved against its root, holds.
var ErrStateMismatch = errors.New("the answer is not the state its block's proof proves")

// proofAnswer is eth_getProof's answer as nodes send it (geth's
// AccountResult).
type proofAnswer struct {
	Address      *common.Address `json:"address"`
	AccountProof []hexutil.Bytes `json:"accountProof"`
	Balance      *hexutil.Big    `json:"balance"`
	CodeHash     *common.Hash    `json:"codeHash"`
	Nonce        *hexutil.Uint64 `json:"nonce"`
	StorageHash  *common.Hash    `json:"storageHash"`
	StorageProof []storageAnswer `json:"storageProof"`
}

type storageAnswer struct {
	Key   string          `json:"key"`
	Value *hexutil.Big    `json:"value"`
	Proof []hexutil.Bytes `json:"proof"`
}

// VerifyProof checks raw, an eth_getProof answer for q, against root with
// go-ethereum's trie proof verification: the account at keccak(address) in
// the state trie, and each slot at keccak(slot) in the account's storage
// trie. What it returns is read from the proof's nodes only; the values the
// answer states beside them are compared with it into Proven.Claims.
func VerifyProof(root common.Hash, q StateQuery, raw json.RawMessage) (*Proven, error) {
	var a proofAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadProof, err)
	}
	p := &Proven{}
	val, err := trie.VerifyProof(root, crypto.Keccak256(q.Address[:]), proofDB(a.AccountProof))
	if err != nil {
		return nil, fmt.Errorf("%w: account: %v", ErrBadProof, err)
	}
	acct := Account{Balance: new(uint256.Int), CodeHash: types.EmptyCodeHash, StorageRoot: types.EmptyRootHash}
	if val != nil {
		var sa types.StateAccount
		if err := rlp.DecodeBytes(val, &sa); err != nil {
			return nil, fmt.Errorf("%w: account: %v", ErrBadProof, err)
		}
		acct = Account{Exists: true, Nonce: sa.Nonce, Balance: sa.Balance, CodeHash: common.BytesToHash(sa.CodeHash), StorageRoot: sa.Root}
	}
	p.Account = acct
	if len(a.StorageProof) != len(q.Slots) {
		return nil, fmt.Errorf("%w: %d storage proofs for %d slots", ErrBadProof, len(a.StorageProof), len(q.Slots))
	}
	var claims []string
	for i, sp := range a.StorageProof {
		if k, ok := storageKey(sp.Key); !ok || k != q.Slots[i] {
			return nil, fmt.Errorf("%w: storage proof %d is for key %q", ErrBadProof, i, sp.Key)
		}
		var v common.Hash
		if acct.StorageRoot != types.EmptyRootHash {
			enc, err := trie.VerifyProof(acct.StorageRoot, crypto.Keccak256(q.Slots[i][:]), proofDB(sp.Proof))
			if err != nil {
				return nil, fmt.Errorf("%w: slot %d: %v", ErrBadProof, i, err)
			}
			if enc != nil {
				_, content, _, err := rlp.Split(enc)
				if err != nil || len(content) > common.HashLength {
					return nil, fmt.Errorf("%w: slot %d: undecodable value", ErrBadProof, i)
				}
				v = common.BytesToHash(content)
			}
		}
		p.Slots = append(p.Slots, v)
		if sp.Value == nil || new(uint256.Int).SetBytes32(v[:]).ToBig().Cmp(sp.Value.ToInt()) != 0 {
			claims = append(claims, fmt.Sprintf("storage value %d", i))
		}
	}
	claims = append(claims, a.claims(q, acct)...)
	if len(claims) > 0 {
		p.Claims = fmt.Errorf("%w: the answer states another %s", ErrStateMismatch, strings.Join(claims, ", "))
	}
	return p, nil
}

// claims names the account values a states that its proof does not prove.
// An account the trie lacks is stated by geth with zero hashes, by others
// with the empty code's and trie's: both are that account.
func (a *proofAnswer) claims(q StateQuery, acct Account) []string {
	var out []string
	if a.Address == nil || *a.Address != q.Address {
		out = append(out, "address")
	}
	if a.Balance == nil || a.Balance.ToInt().Cmp(acct.Balance.ToBig()) != 0 {
		out = append(out, "balance")
	}
	if a.Nonce == nil || uint64(*a.Nonce) != acct.Nonce {
		out = append(out, "nonce")
	}
	emptyOr := func(h *common.Hash, want common.Hash) bool {
		return h != nil && (*h == want || !acct.Exists && *h == common.Hash{})
	}
	if !emptyOr(a.CodeHash, acct.CodeHash) {
		out = append(out, "codeHash")
	}
	if !emptyOr(a.StorageHash, acct.StorageRoot) {
		out = append(out, "storageHash")
	}
	return out
}

// proofDB holds a proof's nodes by their hash, as trie.VerifyProof reads
// them.
func proofDB(nodes []hexutil.Bytes) *memorydb.Database {
	db := memorydb.New()
	for _, n := range nodes {
		_ = db.Put(crypto.Keccak256(n), n)
	}
	return db
}

// Agrees reports whether result, a node's answer to method for p's query,
// is the state p proves: ErrStateMismatch when it is not. eth_getCode's
// code is checked by its hash; eth_getProof's answer by its claims.
func (p *Proven) Agrees(method string, result json.RawMessage) error {
	ok := false
	switch method {
	case "eth_getBalance":
		var b hexutil.Big
		ok = json.Unmarshal(result, &b) == nil && b.ToInt().Cmp(p.Account.Balance.ToBig()) == 0
	case "eth_getTransactionCount":
		var n hexutil.Uint64
		ok = json.Unmarshal(result, &n) == nil && uint64(n) == p.Account.Nonce
	case "eth_getCode":
		var code hexutil.Bytes
		ok = json.Unmarshal(result, &code) == nil && crypto.Keccak256Hash(code) == p.Account.CodeHash
	case "eth_getStorageAt":
		var v hexutil.Bytes
		ok = json.Unmarshal(result, &v) == nil && len(v) <= common.HashLength && len(p.Slots) == 1 &&
			common.BytesToHash(v) == p.Slots[0]
	case "eth_getProof":
		return p.Claims
	}
	if !ok {
		return ErrStateMismatch
	}
	return nil
}

// Answer is geth's answer to method for the state p proves; ok is false
// where the proof does not hold the answer (eth_getCode: only its hash;
// eth_getProof: its nodes are the remote's).
func (p *Proven) Answer(method string) (json.RawMessage, bool) {
	var v any
	switch method {
	case "eth_getBalance":
		v = (*hexutil.Big)(p.Account.Balance.ToBig())
	case "eth_getTransactionCount":
		v = hexutil.Uint64(p.Account.Nonce)
	case "eth_getStorageAt":
		if len(p.Slots) != 1 {
			return nil, false
		}
		v = hexutil.Bytes(p.Slots[0][:])
	default:
		return nil, false
	}
	b, err := json.Marshal(v)
	return b, err == nil
}
