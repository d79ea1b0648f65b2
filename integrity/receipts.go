package integrity

import (
	"encoding/json"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

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
func VerifyReceipts(raw json.RawMessage, want evm.BlockRef, block func(common.Hash) *BlockInfo) Verdict {
	j := jsonscan.SkipSpace(raw, 0)
	if j >= len(raw) || raw[j] != '[' {
		return Verdict{} // null, or not receipts: nothing to check
	}
	w := &receiptsWalk{want: want}
	w.wantByHash = want.Kind == evm.RefHash && json.Unmarshal([]byte(`"`+want.Hash+`"`), &w.wantHash) == nil
	var els [][]byte
	it := jsonscan.Array{Data: raw, I: j + 1}
	for {
		el, ok := it.Next()
		if !ok {
			break
		}
		els = append(els, el)
	}
	ds := make([]decodedReceipt, len(els))
	inParallel(len(els), func(i int) { ds[i] = decodeReceipt(els[i]) })
	for idx := range ds {
		if !w.add(idx, &ds[idx]) {
			return w.v
		}
	}
	if !w.refFailed && (want.Kind == evm.RefNumber || w.wantByHash) {
		w.v.pass(CheckBlockRef)
	}
	if !w.haveBlock && w.wantByHash {
		w.blockHash, w.haveBlock = w.wantHash, true
	}
	if !w.haveBlock && len(w.rs) == 0 {
		return w.v // no receipts, and no block named: nothing to check
	}
	var info *BlockInfo
	if w.haveBlock && block != nil {
		// The root is the receipts' own: made before their block is
		// asked for, which may wait for the block's check (a fetch that
		// asks for both at once runs the two checks side by side).
		if w.rootSkip == "" {
			w.receiptsRoot()
		}
		info = block(w.blockHash)
	}
	w.checkBlock(info)
	return w.v
}

// receiptsWalk is VerifyReceipts' state, one receipt after another.
type receiptsWalk struct {
	v          Verdict
	want       evm.BlockRef
	wantHash   common.Hash
	wantByHash bool

	rs         types.Receipts
	blockBloom types.Bloom // of every receipt's logs
	blockHash  common.Hash // the block receipt 0 names
	haveBlock  bool
	rootSkip   SkipReason
	root       common.Hash // deriveSha(rs), once haveRoot
	haveRoot   bool
	bloomFails int
	refFailed  bool
}

// decodedReceipt is one receipt as sent and as its consensus encoding
// has it, or why it can't be decoded.
type decodedReceipt struct {
	rc     rpcReceipt
	r      *types.Receipt
	reason SkipReason
	bad    bool // not a receipt object encoding/json reads
}

func decodeReceipt(el []byte) decodedReceipt {
	var d decodedReceipt
	if err := json.Unmarshal(el, &d.rc); err != nil {
		d.bad = true
		return d
	}
	d.r, d.reason = d.rc.receipt()
	return d
}

// add checks receipt idx, decoded; false when the receipts can't be
// checked any further.
func (w *receiptsWalk) add(idx int, d *decodedReceipt) bool {
	if d.bad {
		w.v.skip(CheckReceiptsRoot, SkipUndecodable)
		return false
	}
	w.checkRef(idx, &d.rc)
	r, reason := d.r, d.reason
	if reason != "" && reason != SkipUnknownType {
		w.v.skip(CheckReceiptsRoot, reason)
		w.v.skip(CheckLogsBloom, reason)
		return false
	}
	if reason == SkipUnknownType {
		// Its logs are still in the block's bloom; its encoding is not ours.
		w.rootSkip = firstReason(w.rootSkip, reason)
	}
	if d.rc.LogsBloom != nil && *d.rc.LogsBloom != r.Bloom {
		if w.bloomFails == 0 {
			w.v.fail(CheckLogsBloom, "receipt %d: logsBloom is not the bloom of its %d logs", idx, len(r.Logs))
		}
		w.bloomFails++
	}
	bitOr(&w.blockBloom, &r.Bloom)
	w.rs = append(w.rs, r)
	return true
}

// checkRef: receipt idx is of the block receipt 0 is of, and of the one
// asked for. Only the first mismatch is reported.
func (w *receiptsWalk) checkRef(idx int, rc *rpcReceipt) {
	if rc.BlockHash != nil {
		switch {
		case !w.haveBlock:
			w.blockHash, w.haveBlock = *rc.BlockHash, true
		case *rc.BlockHash != w.blockHash && !w.refFailed:
			w.v.fail(CheckBlockRef, "receipt %d is of block %s, receipt 0 of %s", idx, rc.BlockHash.Hex(), w.blockHash.Hex())
			w.refFailed = true
		}
		if w.wantByHash && *rc.BlockHash != w.wantHash && !w.refFailed {
			w.v.fail(CheckBlockRef, "receipt %d is of block %s, asked for %s", idx, rc.BlockHash.Hex(), w.wantHash.Hex())
			w.refFailed = true
		}
	}
	if w.want.Kind == evm.RefNumber && rc.BlockNumber != nil && uint64(*rc.BlockNumber) != w.want.Number && !w.refFailed {
		w.v.fail(CheckBlockRef, "receipt %d is of block %d, asked for %d", idx, uint64(*rc.BlockNumber), w.want.Number)
		w.refFailed = true
	}
}

// receiptsRoot is the root the receipts make.
func (w *receiptsWalk) receiptsRoot() common.Hash {
	if !w.haveRoot {
		w.root, w.haveRoot = deriveSha(w.rs), true
	}
	return w.root
}

// checkBlock checks the receipts against their block's receiptsRoot and
// logsBloom; info is nil when the block is not at hand.
func (w *receiptsWalk) checkBlock(info *BlockInfo) {
	rootSkip := w.rootSkip
	switch {
	case info == nil || !info.haveRoots:
		rootSkip = firstReason(SkipNoBlock, rootSkip)
	case !info.trusted:
		rootSkip = firstReason(SkipHeaderUnverified, rootSkip)
	case info.receiptsSkip != "":
		rootSkip = firstReason(info.receiptsSkip, rootSkip)
	}
	blockLevel := info != nil && info.haveRoots && info.trusted && info.receiptsSkip == ""
	switch {
	case rootSkip != "":
		w.v.skip(CheckReceiptsRoot, rootSkip)
	case w.receiptsRoot() != info.receiptsRoot:
		w.v.fail(CheckReceiptsRoot, "%d receipts make root %s, block %s says %s",
			len(w.rs), w.root.Hex(), w.blockHash.Hex(), info.receiptsRoot.Hex())
	default:
		w.v.pass(CheckReceiptsRoot)
	}
	switch {
	case w.bloomFails > 0:
	case blockLevel && w.blockBloom != info.bloom:
		w.v.fail(CheckLogsBloom, "the receipts' logs make a bloom other than block %s's logsBloom", w.blockHash.Hex())
	case blockLevel || len(w.rs) > 0:
		w.v.pass(CheckLogsBloom)
	}
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
