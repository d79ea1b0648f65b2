package subcenter

import (
	"bytes"

	"github.com/venn-gateway/venn/jsonscan"
)

// headerFields are the members of geth's newHeads notification, in the
// order geth writes them (core/types.Header's JSON encoding, v1.17); an
// absent optional field is written as null, as geth writes a nil one.
var headerFields = [...]string{
	"parentHash", "sha3Uncles", "miner", "stateRoot", "transactionsRoot",
	"receiptsRoot", "logsBloom", "difficulty", "number", "gasLimit", "gasUsed",
	"timestamp", "extraData", "mixHash", "nonce", "baseFeePerGas",
	"withdrawalsRoot", "blobGasUsed", "excessBlobGas", "parentBeaconBlockRoot",
	"requestsHash", "blockAccessListHash", "slotNumber",
}

// bodyFields are members of an eth_getBlockBy* answer that are not in the
// header.
var bodyFields = [...]string{"hash", "transactions", "uncles", "withdrawals", "size", "totalDifficulty", "sealFields"}

// newHead turns a block, as eth_getBlockByHash answers it, into geth's
// newHeads notification result: the header's fields in geth's order, then
// members geth does not know (an L2's extras), then the hash.
func newHead(block []byte) []byte {
	var vals [len(headerFields)][]byte
	var hash []byte
	var extra [][2][]byte
	obj := jsonscan.Object{Data: block, I: jsonscan.SkipSpace(block, 0) + 1}
	for {
		k, v, ok := obj.Next()
		if !ok {
			break
		}
		if i := indexOf(headerFields[:], k); i >= 0 {
			vals[i] = v
			continue
		}
		if string(k) == "hash" {
			hash = v
		}
		if indexOf(bodyFields[:], k) < 0 {
			extra = append(extra, [2][]byte{k, v})
		}
	}
	out := make([]byte, 0, len(block)/2+256)
	out = append(out, '{')
	for i, name := range headerFields {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendMember(out, name, vals[i])
	}
	for _, kv := range extra {
		out = append(out, ',')
		out = appendMember(out, string(kv[0]), kv[1])
	}
	out = append(out, ',')
	out = appendMember(out, "hash", hash)
	return append(out, '}')
}

func appendMember(out []byte, name string, v []byte) []byte {
	out = append(out, '"')
	out = append(out, name...)
	out = append(out, '"', ':')
	if v == nil {
		return append(out, "null"...)
	}
	return append(out, v...)
}

func indexOf(names []string, k []byte) int {
	for i, n := range names {
		if n == string(k) {
			return i
		}
	}
	return -1
}

var (
	removedFalse = []byte(`"removed":false`)
	removedTrue  = []byte(`"removed":true`)
)

// removedLog is a log as a reorg takes it back: the same object with
// "removed":true.
func removedLog(l []byte) []byte {
	out := make([]byte, 0, len(l)+1)
	if i := bytes.LastIndex(l, removedFalse); i >= 0 {
		out = append(out, l[:i]...)
		out = append(out, removedTrue...)
		return append(out, l[i+len(removedFalse):]...)
	}
	// A node that leaves the member out: add it.
	end := bytes.LastIndexByte(l, '}')
	if end < 0 {
		return l
	}
	out = append(out, l[:end]...)
	if bytes.IndexByte(l[:end], ':') >= 0 {
		out = append(out, ',')
	}
	out = append(out, removedTrue...)
	return append(out, l[end:]...)
}
