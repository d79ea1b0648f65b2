package integrity

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// listHasher computes the Merkle-Patricia root of a list (transactions,
// receipts, withdrawals) for types.DeriveSha. It is ours and not
// go-ethereum's trie.StackTrie because package trie brings in the node's
// databases, and with them modules venn does not otherwise need. It keeps
// every pair and builds the trie from the sorted keys when hashed: blocks
// hold thousands of items at most.
type listHasher struct {
	pairs []kv
}

type kv struct {
	key   []byte // nibbles
	value []byte
}

var _ types.ListHasher = (*listHasher)(nil)

// deriveSha is types.DeriveSha over our hasher.
func deriveSha(list types.DerivableList) common.Hash {
	return types.DeriveSha(list, &listHasher{pairs: make([]kv, 0, list.Len())})
}

func (h *listHasher) Reset() { h.pairs = h.pairs[:0] }

// Update copies key and value: DeriveSha reuses its buffers. An empty
// value is no entry, as in a trie.
func (h *listHasher) Update(key, value []byte) error {
	if len(value) == 0 {
		return nil
	}
	nib := make([]byte, 2*len(key))
	for i, b := range key {
		nib[2*i], nib[2*i+1] = b>>4, b&0x0f
	}
	h.pairs = append(h.pairs, kv{key: nib, value: bytes.Clone(value)})
	return nil
}

// Hash is the root: the Keccak of the root node's encoding, whatever its
// size.
func (h *listHasher) Hash() common.Hash {
	if len(h.pairs) == 0 {
		return types.EmptyRootHash
	}
	slices.SortFunc(h.pairs, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
	return crypto.Keccak256Hash(node(h.pairs, 0))
}

// node encodes the trie node holding pairs, whose keys agree on their
// first depth nibbles.
func node(pairs []kv, depth int) []byte {
	if len(pairs) == 1 {
		return encodeList(hexPrefix(pairs[0].key[depth:], true), str(pairs[0].value))
	}
	// The nibbles every key shares past depth: an extension.
	first, last := pairs[0].key, pairs[len(pairs)-1].key // sorted: the extremes bound the rest
	n := 0
	for depth+n < len(first) && depth+n < len(last) && first[depth+n] == last[depth+n] {
		n++
	}
	if n > 0 {
		return encodeList(hexPrefix(first[depth:depth+n], false), ref(node(pairs, depth+n)))
	}
	// A branch: one child per next nibble, and the value of a key that ends
	// here (none does in a list: no index's key is a prefix of another's).
	var (
		items [17][]byte
		value []byte
	)
	for i := 0; i < len(pairs); {
		if len(pairs[i].key) == depth {
			value = pairs[i].value
			i++
			continue
		}
		nib := pairs[i].key[depth]
		j := i + 1
		for j < len(pairs) && len(pairs[j].key) > depth && pairs[j].key[depth] == nib {
			j++
		}
		items[nib] = ref(node(pairs[i:j], depth+1))
		i = j
	}
	for k := range 16 {
		if items[k] == nil {
			items[k] = str(nil)
		}
	}
	items[16] = str(value)
	return encodeList(items[:]...)
}

// ref is how a parent holds a child node: inline when its encoding is
// shorter than a hash, else by its hash.
func ref(enc []byte) []byte {
	if len(enc) < 32 {
		return enc
	}
	return str(crypto.Keccak256(enc))
}

// hexPrefix is the compact encoding of a node's key nibbles, as an RLP
// string.
func hexPrefix(nib []byte, leaf bool) []byte {
	var flag byte
	if leaf {
		flag = 2
	}
	out := make([]byte, 0, len(nib)/2+1)
	if len(nib)%2 == 1 {
		out = append(out, (flag+1)<<4|nib[0])
		nib = nib[1:]
	} else {
		out = append(out, flag<<4)
	}
	for i := 0; i < len(nib); i += 2 {
		out = append(out, nib[i]<<4|nib[i+1])
	}
	return str(out)
}

// str is b encoded as an RLP string.
func str(b []byte) []byte {
	if len(b) == 1 && b[0] < 0x80 {
		return []byte{b[0]}
	}
	return append(rlpHeader(make([]byte, 0, len(b)+9), 0x80, len(b)), b...)
}

// encodeList encodes already-encoded items as an RLP list.
func encodeList(items ...[]byte) []byte {
	size := 0
	for _, it := range items {
		size += len(it)
	}
	out := rlpHeader(make([]byte, 0, size+9), 0xc0, size)
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

// rlpHeader appends the header of a string (base 0x80) or list (0xc0) of
// size bytes.
func rlpHeader(out []byte, base byte, size int) []byte {
	if size < 56 {
		return append(out, base+byte(size))
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], uint64(size))
	n := be[bits.LeadingZeros64(uint64(size))/8:]
	out = append(out, base+55+byte(len(n)))
	return append(out, n...)
}
