package evm

// Integrity checks of what a remote sent, against itself: a block's hash
// against its header fields, its transactionsRoot against its transactions
// (and each transaction's hash against its fields), its withdrawalsRoot
// against its withdrawals, and a block's receipts against its receiptsRoot
// and logsBloom. They rebuild the consensus objects with go-ethereum's types
// and hash them; nothing the remote computed is taken on trust.
//
// A check that can't be run is skipped, never failed: a transaction or
// receipt type go-ethereum can't encode (an L2's deposit), a header or
// transaction member it doesn't know (an L2's, or a fork newer than
// go-ethereum v1.17.10), a value that doesn't decode. A false failure would
// cast an honest remote as a liar; a skip is only counted.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/venn-gateway/venn/internal/jsonscan"
)

// Check is one integrity check. The set is fixed: its names are metric
// label values.
type Check uint8

const (
	// CheckBlockRef: the answer is for the block asked for (its number or
	// hash, and every receipt's block).
	CheckBlockRef Check = iota + 1
	// CheckBlockHash: the block's hash is the hash of its header fields.
	CheckBlockHash
	// CheckTxHash: each transaction's hash is the hash of its fields.
	CheckTxHash
	// CheckTxRoot: transactionsRoot is the root of the transactions.
	CheckTxRoot
	// CheckWithdrawalsRoot: withdrawalsRoot is the root of the withdrawals.
	CheckWithdrawalsRoot
	// CheckReceiptsRoot: the block's receiptsRoot is the root of its receipts.
	CheckReceiptsRoot
	// CheckLogsBloom: each receipt's logsBloom, and the block's, is the bloom
	// of the logs.
	CheckLogsBloom

	numChecks = iota
)

var checkNames = [numChecks + 1]string{
	CheckBlockRef: "block_ref", CheckBlockHash: "block_hash", CheckTxHash: "transaction_hash",
	CheckTxRoot: "transactions_root", CheckWithdrawalsRoot: "withdrawals_root",
	CheckReceiptsRoot: "receipts_root", CheckLogsBloom: "logs_bloom",
}

func (c Check) String() string {
	if int(c) < len(checkNames) && checkNames[c] != "" {
		return checkNames[c]
	}
	return "unknown"
}

// AllChecks lists every check.
func AllChecks() []Check {
	out := make([]Check, 0, numChecks)
	for c := CheckBlockRef; c <= numChecks; c++ {
		out = append(out, c)
	}
	return out
}

// CheckSet is a set of checks.
type CheckSet uint16

// Has reports whether c is in the set.
func (s CheckSet) Has(c Check) bool { return s&(1<<c) != 0 }

func (s *CheckSet) add(c Check) { *s |= 1 << c }

// SkipReason says why a check was not run. The set is fixed: they are
// metric label values.
type SkipReason string

const (
	// SkipUnknownField: a member go-ethereum's type does not have (an L2's
	// header field, a newer fork's): the hash may cover it.
	SkipUnknownField SkipReason = "unknown_field"
	// SkipMissingField: a member the encoding needs is absent.
	SkipMissingField SkipReason = "missing_field"
	// SkipUndecodable: a value does not decode as its field's type.
	SkipUndecodable SkipReason = "undecodable"
	// SkipUnknownType: a transaction or receipt type go-ethereum can't
	// encode (an L2 deposit, 0x7e; Arbitrum's 0x64-0x6a).
	SkipUnknownType SkipReason = "unknown_type"
	// SkipUnsigned: a transaction without a signature, which no consensus
	// encoding holds (Polygon lists its state-sync transaction so).
	SkipUnsigned SkipReason = "unsigned"
	// SkipHashOnly: the block lists its transactions as hashes.
	SkipHashOnly SkipReason = "hash_only"
	// SkipHeaderUnverified: receipts are checked against a block whose
	// header hash could not be reproduced, so its roots are only claims.
	SkipHeaderUnverified SkipReason = "header_unverified"
	// SkipNoBlock: the receipts' block is not at hand to check them against.
	SkipNoBlock SkipReason = "no_block"
	// SkipPerTransaction: receipts fetched one at a time, from any remote:
	// their root proves nothing about one remote.
	SkipPerTransaction SkipReason = "per_transaction"
	// SkipSingleReceipt: eth_getTransactionReceipt, which has no root.
	SkipSingleReceipt SkipReason = "single_receipt"
	// SkipUnreproducible: every remote asked failed the check alike: venn's
	// encoding, not the remotes, is at odds with this chain.
	SkipUnreproducible SkipReason = "unreproducible"
)

// Skip is a check that was not run, and why.
type Skip struct {
	Check  Check
	Reason SkipReason
}

// Failure is a check that failed: the data contradicts itself.
type Failure struct {
	Check  Check
	Detail string
}

func (f Failure) String() string { return f.Check.String() + ": " + f.Detail }

// Verdict is what verifying one answer found. A check is in at most one of
// Passed, Failed and Skipped.
type Verdict struct {
	Passed  CheckSet
	Failed  []Failure
	Skipped []Skip
	// Block is what the block's receipts are checked against; VerifyBlock
	// sets it for a block.
	Block *BlockInfo
}

// Err is nil when nothing failed, else an error naming every failure.
func (v *Verdict) Err() error {
	if len(v.Failed) == 0 {
		return nil
	}
	parts := make([]string, len(v.Failed))
	for i, f := range v.Failed {
		parts[i] = f.String()
	}
	return fmt.Errorf("integrity: %s", strings.Join(parts, "; "))
}

// Excuse moves the failures of the checks in set to Skipped with reason.
func (v *Verdict) Excuse(set CheckSet, reason SkipReason) {
	kept := v.Failed[:0]
	for _, f := range v.Failed {
		if set.Has(f.Check) {
			v.Skipped = append(v.Skipped, Skip{Check: f.Check, Reason: reason})
			continue
		}
		kept = append(kept, f)
	}
	v.Failed = kept
}

// FailedSet is the set of checks that failed.
func (v *Verdict) FailedSet() CheckSet {
	var s CheckSet
	for _, f := range v.Failed {
		s.add(f.Check)
	}
	return s
}

func (v *Verdict) pass(c Check) { v.Passed.add(c) }

func (v *Verdict) fail(c Check, format string, args ...any) {
	v.Failed = append(v.Failed, Failure{Check: c, Detail: fmt.Sprintf(format, args...)})
}

func (v *Verdict) skip(c Check, reason SkipReason) {
	v.Skipped = append(v.Skipped, Skip{Check: c, Reason: reason})
}

// BlockInfo is what a block's receipts are checked against.
type BlockInfo struct {
	Hash   common.Hash // as the block states it
	Number uint64

	receiptsRoot common.Hash
	bloom        types.Bloom
	haveRoots    bool
	// trusted: the header's hash was reproduced, so its roots are the
	// block's and not only the remote's claim.
	trusted bool
	// receiptsSkip: why the receipts can't be checked as a whole (the block
	// holds a transaction no consensus encoding has); "" when they can.
	receiptsSkip SkipReason
}

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
func VerifyBlock(raw json.RawMessage, want BlockRef) Verdict {
	var v Verdict
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return v
	}
	var (
		hdr      = make([]byte, 0, 1536) // the header members, as an object
		present  = make(map[string]bool, len(headerKeys))
		unknown  string
		hashRaw  []byte
		txsRaw   []byte
		wsRaw    []byte
		info     = &BlockInfo{}
		roots    struct{ txs, receipts, withdrawals []byte }
		bloomRaw []byte
		number   []byte
	)
	hdr = append(hdr, '{')
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
			present[key] = true
			if len(hdr) > 1 {
				hdr = append(hdr, ',')
			}
			hdr = append(hdr, '"')
			hdr = append(hdr, key...)
			hdr = append(hdr, '"', ':')
			hdr = append(hdr, val...)
			switch key {
			case "transactionsRoot":
				roots.txs = val
			case "receiptsRoot":
				roots.receipts = val
			case "withdrawalsRoot":
				roots.withdrawals = val
			case "logsBloom":
				bloomRaw = val
			case "number":
				number = val
			}
		case key == "hash":
			hashRaw = val
		case key == "transactions":
			txsRaw = val
		case key == "withdrawals":
			wsRaw = val
		case blockKeys[key]:
		default:
			if unknown == "" {
				unknown = key
			}
		}
	}
	hdr = append(hdr, '}')

	var claimed common.Hash
	haveHash := json.Unmarshal(hashRaw, &claimed) == nil
	info.Hash = claimed
	n, numErr := hexutil.DecodeUint64(unquote(number))
	info.Number = n
	v.Block = info

	// The block asked for.
	switch want.Kind {
	case RefNumber:
		switch {
		case len(number) == 0:
			v.skip(CheckBlockRef, SkipMissingField)
		case numErr != nil:
			v.skip(CheckBlockRef, SkipUndecodable)
		case n != want.Number:
			v.fail(CheckBlockRef, "block %d answered for number %d", n, want.Number)
		default:
			v.pass(CheckBlockRef)
		}
	case RefHash:
		var w common.Hash
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

	// The header's hash.
	missing := ""
	for _, k := range requiredHeaderKeys {
		if !present[k] {
			missing = k
			break
		}
	}
	switch {
	case unknown != "":
		v.skip(CheckBlockHash, SkipUnknownField)
	case missing != "" || !haveHash:
		v.skip(CheckBlockHash, SkipMissingField)
	default:
		var h types.Header
		if err := json.Unmarshal(hdr, &h); err != nil {
			v.skip(CheckBlockHash, SkipUndecodable)
			break
		}
		if got := h.Hash(); got != claimed {
			v.fail(CheckBlockHash, "header hashes to %s, block says %s", got.Hex(), claimed.Hex())
			break
		}
		v.pass(CheckBlockHash)
		info.trusted = true
	}
	if json.Unmarshal(roots.receipts, &info.receiptsRoot) == nil && json.Unmarshal(bloomRaw, &info.bloom) == nil {
		info.haveRoots = true
	}

	verifyTxs(&v, txsRaw, roots.txs, info)
	verifyWithdrawals(&v, wsRaw, roots.withdrawals)
	return v
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
		hashOnly  bool
	)
	it := jsonscan.Array{Data: txsRaw, I: j + 1}
	for idx := 0; ; idx++ {
		el, ok := it.Next()
		if !ok {
			break
		}
		if len(el) > 0 && el[0] == '"' {
			hashOnly = true
			continue
		}
		tx, reason := decodeTx(el)
		if reason != "" {
			rootSkip, hashSkip = firstReason(rootSkip, reason), firstReason(hashSkip, reason)
			if reason == SkipUnsigned || reason == SkipUnknownField {
				// Its receipt may look like any other, and be outside the
				// root and bloom (Polygon's state sync): the receipts can't
				// be checked as a whole. A receipt of an unknown type says
				// so itself, and its logs are still in the bloom.
				info.receiptsSkip = firstReason(info.receiptsSkip, reason)
			}
			continue
		}
		var stated common.Hash
		if err := json.Unmarshal(jsonscan.Member(el, "hash"), &stated); err != nil {
			hashSkip = firstReason(hashSkip, SkipMissingField)
		} else if got := tx.Hash(); got != stated {
			if hashFails == 0 {
				v.fail(CheckTxHash, "transaction %d hashes to %s, block says %s", idx, got.Hex(), stated.Hex())
			}
			hashFails++
		}
		txs = append(txs, tx)
	}
	if hashOnly {
		v.skip(CheckTxHash, SkipHashOnly)
		v.skip(CheckTxRoot, SkipHashOnly)
		return
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

// rpcReceipt is the part of a receipt its consensus encoding holds, and the
// block it names.
type rpcReceipt struct {
	Type              *hexutil.Uint64 `json:"type"`
	Status            *hexutil.Uint64 `json:"status"`
	Root              *hexutil.Bytes  `json:"root"`
	CumulativeGasUsed *hexutil.Uint64 `json:"cumulativeGasUsed"`
	LogsBloom         *types.Bloom    `json:"logsBloom"`
	Logs              []rpcLog        `json:"logs"`
	BlockHash         *common.Hash    `json:"blockHash"`
	BlockNumber       *hexutil.Uint64 `json:"blockNumber"`
}

type rpcLog struct {
	Address *common.Address `json:"address"`
	Topics  []common.Hash   `json:"topics"`
	Data    *hexutil.Bytes  `json:"data"`
}

// VerifyReceipts checks a block's receipts as eth_getBlockReceipts returns
// them: that they are for the block want names (a number or a hash), each
// receipt's logsBloom, and, against their block as block finds it by hash,
// the block's receiptsRoot and logsBloom. block may return nil: then only
// what the receipts say of themselves is checked. An empty list names no
// block: it is checked against want's, when want is a hash.
func VerifyReceipts(raw json.RawMessage, want BlockRef, block func(common.Hash) *BlockInfo) Verdict {
	var v Verdict
	j := jsonscan.SkipSpace(raw, 0)
	if j >= len(raw) || raw[j] != '[' {
		return v // null, or not receipts: nothing to check
	}
	var (
		rs         types.Receipts
		blockBloom types.Bloom
		blockHash  common.Hash
		haveBlock  bool
		rootSkip   SkipReason
		bloomFails int
		refFailed  bool
	)
	var wantHash common.Hash
	wantByHash := want.Kind == RefHash && json.Unmarshal([]byte(`"`+want.Hash+`"`), &wantHash) == nil
	it := jsonscan.Array{Data: raw, I: j + 1}
	for idx := 0; ; idx++ {
		el, ok := it.Next()
		if !ok {
			break
		}
		var rc rpcReceipt
		if err := json.Unmarshal(el, &rc); err != nil {
			v.skip(CheckReceiptsRoot, SkipUndecodable)
			return v
		}
		// Which block.
		if rc.BlockHash != nil {
			switch {
			case !haveBlock:
				blockHash, haveBlock = *rc.BlockHash, true
			case *rc.BlockHash != blockHash && !refFailed:
				v.fail(CheckBlockRef, "receipt %d is of block %s, receipt 0 of %s", idx, rc.BlockHash.Hex(), blockHash.Hex())
				refFailed = true
			}
			if wantByHash && *rc.BlockHash != wantHash && !refFailed {
				v.fail(CheckBlockRef, "receipt %d is of block %s, asked for %s", idx, rc.BlockHash.Hex(), wantHash.Hex())
				refFailed = true
			}
		}
		if want.Kind == RefNumber && rc.BlockNumber != nil && uint64(*rc.BlockNumber) != want.Number && !refFailed {
			v.fail(CheckBlockRef, "receipt %d is of block %d, asked for %d", idx, uint64(*rc.BlockNumber), want.Number)
			refFailed = true
		}

		r, reason := rc.receipt()
		if reason != "" && reason != SkipUnknownType {
			v.skip(CheckReceiptsRoot, reason)
			v.skip(CheckLogsBloom, reason)
			return v
		}
		if reason == SkipUnknownType {
			// Its logs are still in the block's bloom; its encoding is not ours.
			rootSkip = firstReason(rootSkip, reason)
		}
		if rc.LogsBloom != nil && *rc.LogsBloom != r.Bloom {
			if bloomFails == 0 {
				v.fail(CheckLogsBloom, "receipt %d: logsBloom is not the bloom of its %d logs", idx, len(r.Logs))
			}
			bloomFails++
		}
		bitOr(&blockBloom, &r.Bloom)
		rs = append(rs, r)
	}
	if !refFailed && (want.Kind == RefNumber || wantByHash) {
		v.pass(CheckBlockRef)
	}
	if !haveBlock && wantByHash {
		blockHash, haveBlock = wantHash, true
	}
	if !haveBlock && len(rs) == 0 {
		return v // no receipts, and no block named: nothing to check
	}

	var info *BlockInfo
	if haveBlock && block != nil {
		info = block(blockHash)
	}
	switch {
	case info == nil || !info.haveRoots:
		rootSkip = firstReason(SkipNoBlock, rootSkip)
	case !info.trusted:
		rootSkip = firstReason(SkipHeaderUnverified, rootSkip)
	case info.receiptsSkip != "":
		rootSkip = firstReason(info.receiptsSkip, rootSkip)
	}
	blockLevel := info != nil && info.haveRoots && info.trusted && info.receiptsSkip == ""
	if rootSkip != "" {
		v.skip(CheckReceiptsRoot, rootSkip)
	} else if got := deriveSha(rs); got != info.receiptsRoot {
		v.fail(CheckReceiptsRoot, "%d receipts make root %s, block %s says %s", len(rs), got.Hex(), blockHash.Hex(), info.receiptsRoot.Hex())
	} else {
		v.pass(CheckReceiptsRoot)
	}
	switch {
	case bloomFails > 0:
	case blockLevel && blockBloom != info.bloom:
		v.fail(CheckLogsBloom, "the receipts' logs make a bloom other than block %s's logsBloom", blockHash.Hex())
	case blockLevel || len(rs) > 0:
		v.pass(CheckLogsBloom)
	}
	return v
}

// VerifyReceipt checks one receipt as eth_getTransactionReceipt returns
// it: its logsBloom against its logs. It has no root to be checked against.
func VerifyReceipt(raw json.RawMessage) Verdict {
	var v Verdict
	j := jsonscan.SkipSpace(raw, 0)
	if j >= len(raw) || raw[j] != '{' {
		return v
	}
	v.skip(CheckReceiptsRoot, SkipSingleReceipt)
	var rc rpcReceipt
	if err := json.Unmarshal(raw, &rc); err != nil {
		v.skip(CheckLogsBloom, SkipUndecodable)
		return v
	}
	r, reason := rc.receipt()
	switch {
	case reason != "" && reason != SkipUnknownType:
		v.skip(CheckLogsBloom, reason)
	case rc.LogsBloom == nil:
		v.skip(CheckLogsBloom, SkipMissingField)
	case *rc.LogsBloom != r.Bloom:
		v.fail(CheckLogsBloom, "logsBloom is not the bloom of its %d logs", len(r.Logs))
	default:
		v.pass(CheckLogsBloom)
	}
	return v
}

// receipt builds the consensus receipt. Its bloom is computed from its
// logs, whatever the remote said. An unknown type is reported, with the
// receipt still built so that its logs count in the block's bloom.
func (rc *rpcReceipt) receipt() (*types.Receipt, SkipReason) {
	r := &types.Receipt{}
	if rc.Type != nil {
		if *rc.Type > 0xff {
			return nil, SkipUndecodable
		}
		r.Type = uint8(*rc.Type)
	}
	if rc.CumulativeGasUsed == nil {
		return nil, SkipMissingField
	}
	r.CumulativeGasUsed = uint64(*rc.CumulativeGasUsed)
	switch {
	case rc.Root != nil && len(*rc.Root) > 0:
		r.PostState = *rc.Root // before Byzantium
	case rc.Status == nil:
		return nil, SkipMissingField
	case *rc.Status > 1:
		return nil, SkipUndecodable
	default:
		r.Status = uint64(*rc.Status)
	}
	if rc.Logs == nil {
		return nil, SkipMissingField
	}
	r.Logs = make([]*types.Log, len(rc.Logs))
	for i, l := range rc.Logs {
		if l.Address == nil || l.Data == nil || l.Topics == nil {
			return nil, SkipMissingField
		}
		r.Logs[i] = &types.Log{Address: *l.Address, Topics: l.Topics, Data: *l.Data}
	}
	r.Bloom = types.CreateBloom(r)
	if !knownType(uint64(r.Type)) {
		return r, SkipUnknownType
	}
	return r, ""
}

func bitOr(dst, src *types.Bloom) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

func firstReason(have, next SkipReason) SkipReason {
	if have != "" {
		return have
	}
	return next
}

// unknownMember returns the first member of obj not in known, "" if none.
func unknownMember(obj []byte, known map[string]bool) string {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ""
	}
	it := jsonscan.Object{Data: obj, I: i + 1}
	for {
		k, _, ok := it.Next()
		if !ok {
			return ""
		}
		if !known[string(k)] {
			return string(k)
		}
	}
}

// unquote strips a JSON string's quotes; hex values carry no escapes.
func unquote(v []byte) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return string(v[1 : len(v)-1])
	}
	return string(v)
}
