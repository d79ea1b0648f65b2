package integrity

import (
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// Header members go-ethereum v1.17.10 hashes, through Prague/Osaka and the
// fields of Amsterdam it already has.
var headerKeys = map[string]bool{
	"parentHash": true, "sha3Uncles": true, "miner": true, "stateRoot": true,
	"transactionsRoot": true, "receiptsRoot": true, "logsBloom": true, "difficulty": true,
	"number": true, "gasLimit": true, "gasUsed": true, "timestamp": true, "extraData": true,
	"mixHash": true, "nonce": true, "baseFeePerGas": true, "withdrawalsRoot": true,
	"blobGasUsed": true, "excessBlobGas": true, "parentBeaconBlockRoot": true,
	"requestsHash": true, "blockAccessListHash": true, "slotNumber": true,
}

// requiredHeaderKeys are the members of every header; without one the hash
// can't be rebuilt (go-ethereum's decoder would take a zero).
var requiredHeaderKeys = []string{
	"parentHash", "sha3Uncles", "miner", "stateRoot", "transactionsRoot", "receiptsRoot",
	"logsBloom", "difficulty", "number", "gasLimit", "gasUsed", "timestamp", "extraData",
	"mixHash", "nonce",
}

// blockKeys are a block's members outside its header; "totalDifficulty"
// and "author" (Nethermind's name for the miner) are nodes' extras.
var blockKeys = map[string]bool{
	"hash": true, "size": true, "transactions": true, "uncles": true, "withdrawals": true,
	"totalDifficulty": true, "author": true,
}

// txKeys are the members of a transaction object that go-ethereum decodes,
// or that say where it is (and from whom) without being part of it.
// "publicKey", "raw", "creates", "condition" and "standardV" are
// OpenEthereum-lineage extras derived from the transaction.
var txKeys = map[string]bool{
	"type": true, "chainId": true, "nonce": true, "to": true, "gas": true, "gasPrice": true,
	"maxPriorityFeePerGas": true, "maxFeePerGas": true, "maxFeePerBlobGas": true,
	"value": true, "input": true, "accessList": true, "blobVersionedHashes": true,
	"authorizationList": true, "v": true, "r": true, "s": true, "yParity": true,
	"hash": true, "blockHash": true, "blockNumber": true, "blockTimestamp": true,
	"transactionIndex": true, "from": true,
	"publicKey": true, "raw": true, "creates": true, "condition": true, "standardV": true,
}

// knownType reports a transaction or receipt type go-ethereum encodes.
func knownType(t uint64) bool {
	switch t {
	case types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType, types.BlobTxType, types.SetCodeTxType:
		return true
	}
	return false
}

// VerifyBlock checks a block as eth_getBlockByNumber or eth_getBlockByHash
// returns it, with full transactions or their hashes: that it is the block
// want names (a number or a hash; other kinds are not checked), its hash,
// its transactions' hashes and root, and its withdrawals' root. null, or
// anything that is not an object, has nothing to check.
func VerifyBlock(raw json.RawMessage, want evm.BlockRef) Verdict {
	var v Verdict
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return v
	}
	f := readBlock(raw, i)
	info := &BlockInfo{}
	haveHash := json.Unmarshal(f.hash, &info.Hash) == nil
	n, numErr := hexutil.DecodeUint64(unquote(f.number))
	info.Number = n
	v.Block = info

	checkBlockRef(&v, want, f, numErr, haveHash)
	if checkHeader(&v, f, info.Hash, haveHash) {
		info.trusted = true
	}
	if json.Unmarshal(f.receiptsRoot, &info.receiptsRoot) == nil && json.Unmarshal(f.bloom, &info.bloom) == nil {
		info.haveRoots = true
	}
	verifyTxs(&v, f.txs, f.txRoot, info)
	verifyWithdrawals(&v, f.withdrawals, f.withdrawalsRoot)
	return v
}

// blockFields are the members of a block object the checks read, each as
// sent.
type blockFields struct {
	hdr     []byte          // the header members, as an object
	present map[string]bool // header members present and not null
	unknown string          // the first member no check knows, "" if none

	hash, txs, withdrawals                []byte
	txRoot, receiptsRoot, withdrawalsRoot []byte
	bloom, number                         []byte
}

// readBlock reads the members of the block object that starts at raw[i].
func readBlock(raw []byte, i int) *blockFields {
	f := &blockFields{
		hdr:     make([]byte, 0, 1536),
		present: make(map[string]bool, len(headerKeys)),
	}
	f.hdr = append(f.hdr, '{')
	obj := jsonscan.Object{Data: raw, I: i + 1}
	for {
		k, val, ok := obj.Next()
		if !ok {
			break
		}
		key := string(k)
		switch {
		case headerKeys[key]:
			if string(val) == "null" {
				continue // geth's newHeads writes forks a header lacks as null
			}
			f.addHeader(key, val)
		case key == "hash":
			f.hash = val
		case key == "transactions":
			f.txs = val
		case key == "withdrawals":
			f.withdrawals = val
		case blockKeys[key]:
		default:
			if f.unknown == "" {
				f.unknown = key
			}
		}
	}
	f.hdr = append(f.hdr, '}')
	return f
}

// addHeader adds one header member to hdr, and keeps the ones the checks
// need.
func (f *blockFields) addHeader(key string, val []byte) {
	f.present[key] = true
	if len(f.hdr) > 1 {
		f.hdr = append(f.hdr, ',')
	}
	f.hdr = append(f.hdr, '"')
	f.hdr = append(f.hdr, key...)
	f.hdr = append(f.hdr, '"', ':')
	f.hdr = append(f.hdr, val...)
	switch key {
	case "transactionsRoot":
		f.txRoot = val
	case "receiptsRoot":
		f.receiptsRoot = val
	case "withdrawalsRoot":
		f.withdrawalsRoot = val
	case "logsBloom":
		f.bloom = val
	case "number":
		f.number = val
	}
}

// checkBlockRef: the block is the one asked for. numErr is why its number
// did not decode; haveHash, whether its hash did.
func checkBlockRef(v *Verdict, want evm.BlockRef, f *blockFields, numErr error, haveHash bool) {
	switch want.Kind {
	case evm.RefNumber:
		switch {
		case len(f.number) == 0:
			v.skip(CheckBlockRef, SkipMissingField)
		case numErr != nil:
			v.skip(CheckBlockRef, SkipUndecodable)
		case v.Block.Number != want.Number:
			v.fail(CheckBlockRef, "block %d answered for number %d", v.Block.Number, want.Number)
		default:
			v.pass(CheckBlockRef)
		}
	case evm.RefHash:
		var w common.Hash
		claimed := v.Block.Hash
		switch {
		case json.Unmarshal([]byte(`"`+want.Hash+`"`), &w) != nil:
		case !haveHash:
			v.skip(CheckBlockRef, SkipMissingField)
		case w != claimed:
			v.fail(CheckBlockRef, "block %s answered for hash %s", claimed.Hex(), w.Hex())
		default:
			v.pass(CheckBlockRef)
		}
	}
}

// checkHeader: the block's hash is its header's; true when it is
// reproduced.
func checkHeader(v *Verdict, f *blockFields, claimed common.Hash, haveHash bool) bool {
	missing := ""
	for _, k := range requiredHeaderKeys {
		if !f.present[k] {
			missing = k
			break
		}
	}
	switch {
	case f.unknown != "":
		v.skip(CheckBlockHash, SkipUnknownField)
	case missing != "" || !haveHash:
		v.skip(CheckBlockHash, SkipMissingField)
	default:
		var h types.Header
		if err := json.Unmarshal(f.hdr, &h); err != nil {
			v.skip(CheckBlockHash, SkipUndecodable)
			return false
		}
		if got := h.Hash(); got != claimed {
			v.fail(CheckBlockHash, "header hashes to %s, block says %s", got.Hex(), claimed.Hex())
			return false
		}
		v.pass(CheckBlockHash)
		return true
	}
	return false
}

// verifyTxs checks every transaction's hash and the transactions' root.
func verifyTxs(v *Verdict, txsRaw, rootRaw []byte, info *BlockInfo) {
	j := jsonscan.SkipSpace(txsRaw, 0)
	if j >= len(txsRaw) || txsRaw[j] != '[' {
		v.skip(CheckTxRoot, SkipMissingField)
		return
	}
	var (
		txs       types.Transactions
		rootSkip  SkipReason // why the root can't be checked
		hashSkip  SkipReason // why some transaction's hash can't be
		hashFails int
	)
	els, hashOnly := txElements(txsRaw, j)
	if hashOnly {
		v.skip(CheckTxHash, SkipHashOnly)
		v.skip(CheckTxRoot, SkipHashOnly)
		return
	}
	for idx, d := range decodeTxs(els) {
		if d.reason != "" {
			rootSkip, hashSkip = firstReason(rootSkip, d.reason), firstReason(hashSkip, d.reason)
			if d.reason == SkipUnsigned || d.reason == SkipUnknownField {
				// Its receipt may look like any other, and be outside the
				// root and bloom (Polygon's state sync): the receipts can't
				// be checked as a whole. A receipt of an unknown type says
				// so itself, and its logs are still in the bloom.
				info.receiptsSkip = firstReason(info.receiptsSkip, d.reason)
			}
			continue
		}
		switch {
		case !d.haveStated:
			hashSkip = firstReason(hashSkip, SkipMissingField)
		case d.got != d.stated:
			if hashFails == 0 {
				v.fail(CheckTxHash, "transaction %d hashes to %s, block says %s", idx, d.got.Hex(), d.stated.Hex())
			}
			hashFails++
		}
		txs = append(txs, d.tx)
	}
	switch {
	case hashFails > 0:
	case hashSkip != "":
		v.skip(CheckTxHash, hashSkip)
	case len(txs) > 0:
		v.pass(CheckTxHash)
	}
	var root common.Hash
	switch {
	case rootSkip != "":
		v.skip(CheckTxRoot, rootSkip)
	case json.Unmarshal(rootRaw, &root) != nil:
		v.skip(CheckTxRoot, SkipMissingField)
	default:
		if got := deriveSha(txs); got != root {
			v.fail(CheckTxRoot, "%d transactions make root %s, block says %s", len(txs), got.Hex(), root.Hex())
		} else {
			v.pass(CheckTxRoot)
		}
	}
}

// txElements are the elements of the transactions array starting at
// raw[j]; hashOnly when any is a hash rather than an object.
func txElements(raw []byte, j int) (els [][]byte, hashOnly bool) {
	it := jsonscan.Array{Data: raw, I: j + 1}
	for {
		el, ok := it.Next()
		if !ok {
			return els, hashOnly
		}
		if len(el) > 0 && el[0] == '"' {
			hashOnly = true
			continue
		}
		els = append(els, el)
	}
}

// decodedTx is one transaction decoded and hashed, or why it can't be.
type decodedTx struct {
	tx         *types.Transaction
	reason     SkipReason
	got        common.Hash // its hash as encoded
	stated     common.Hash // its hash as the block states it
	haveStated bool
}

// decodeTxs decodes and hashes each transaction object; the results are
// in order.
func decodeTxs(els [][]byte) []decodedTx {
	out := make([]decodedTx, len(els))
	inParallel(len(els), func(i int) {
		d := &out[i]
		d.tx, d.reason = decodeTx(els[i])
		if d.reason != "" {
			return
		}
		d.got = d.tx.Hash()
		d.haveStated = json.Unmarshal(jsonscan.Member(els[i], "hash"), &d.stated) == nil
	})
	return out
}

// parallelItems is the number of list items (a block's transactions, its
// receipts) from which they are decoded on every core at once: decoding
// is most of a large block's check, and the check is on the way of every
// new head.
const parallelItems = 32

// inParallel calls fn(0..n-1), on up to GOMAXPROCS goroutines when n is
// large enough to be worth them; fn must write only its own index's
// result.
func inParallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/(parallelItems/2))
	if n < parallelItems || workers < 2 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// decodeTx decodes one transaction object, or says why it can't be
// encoded as the chain did.
func decodeTx(el []byte) (*types.Transaction, SkipReason) {
	var typ uint64
	if t := jsonscan.Member(el, "type"); len(t) > 0 && string(t) != "null" {
		n, err := hexutil.DecodeUint64(unquote(t))
		if err != nil {
			return nil, SkipUndecodable
		}
		typ = n
	}
	if !knownType(typ) {
		return nil, SkipUnknownType
	}
	if k := unknownMember(el, txKeys); k != "" {
		// A chain that reuses a known type for a different payload (Celo's
		// legacy transactions with feeCurrency) says so with a member.
		return nil, SkipUnknownField
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalJSON(el); err != nil {
		return nil, SkipUndecodable
	}
	if v, r, s := tx.RawSignatureValues(); v.Sign() == 0 && r.Sign() == 0 && s.Sign() == 0 {
		return nil, SkipUnsigned
	}
	return tx, ""
}

// verifyWithdrawals checks withdrawalsRoot when the block lists withdrawals.
func verifyWithdrawals(v *Verdict, wsRaw, rootRaw []byte) {
	if len(wsRaw) == 0 || string(wsRaw) == "null" {
		return
	}
	var rws []rpcWithdrawal
	if err := json.Unmarshal(wsRaw, &rws); err != nil {
		v.skip(CheckWithdrawalsRoot, SkipUndecodable)
		return
	}
	ws := make(types.Withdrawals, len(rws))
	for i, w := range rws {
		if w.Index == nil || w.Validator == nil || w.Address == nil || w.Amount == nil {
			v.skip(CheckWithdrawalsRoot, SkipMissingField)
			return
		}
		ws[i] = &types.Withdrawal{Index: uint64(*w.Index), Validator: uint64(*w.Validator), Address: *w.Address, Amount: uint64(*w.Amount)}
	}
	var root common.Hash
	if err := json.Unmarshal(rootRaw, &root); err != nil {
		v.skip(CheckWithdrawalsRoot, SkipMissingField)
		return
	}
	if got := deriveSha(ws); got != root {
		v.fail(CheckWithdrawalsRoot, "%d withdrawals make root %s, block says %s", len(ws), got.Hex(), root.Hex())
		return
	}
	v.pass(CheckWithdrawalsRoot)
}

// rpcWithdrawal is a withdrawal; every member is needed to encode it.
type rpcWithdrawal struct {
	Index     *hexutil.Uint64 `json:"index"`
	Validator *hexutil.Uint64 `json:"validatorIndex"`
	Address   *common.Address `json:"address"`
	Amount    *hexutil.Uint64 `json:"amount"`
}
