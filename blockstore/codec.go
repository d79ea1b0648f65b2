package blockstore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/venn-gateway/venn/jsonscan"
)

// Stored JSON is the node's JSON, shortened by a reversible encoding
// (squeeze, expand):
//
//   - a string value equal to one of its row's values (the block's hash,
//     number and timestamp, the transaction's hash, a log's address and
//     topics), quoted as the node wrote it, becomes one slot code byte,
//     and expand puts the value back from the columns;
//   - a string value of lowercase hex, 0x and at least minHex digits in an
//     even number (hashes, addresses, signatures, input, data, blooms),
//     becomes codeHex, its byte count and the bytes, packed so that runs of
//     zero bytes take one byte (a mostly empty logsBloom shrinks to a few);
//   - a member name of the keys table followed by its colon becomes
//     codeKey and the name's index.
//
// The codes are control bytes, which valid JSON never holds outside \t,
// \n and \r, so the encoding is exact for every input squeeze accepts,
// whatever the node's formatting: anything written differently
// (upper-case hex, odd lengths, whitespace before a colon) just stays.
// The format is stored: the codes and the keys table only ever grow.

// Slots of a dict.
const (
	slotBlockHash = iota
	slotNumber
	slotTime
	slotParent
	slotTxHash
	slotAddress
	slotTopic0 // slotTopic0+i is topic i
	nSlots     = slotTopic0 + maxTopics
)

// maxTopics is how many topics a log may have (LOG0 to LOG4).
const maxTopics = 4

// codes are the bytes standing for the slots: control bytes that are not
// JSON whitespace.
var codes = [nSlots]byte{1, 2, 3, 4, 5, 6, 7, 8, 11, 12}

// The other codes.
const (
	codeHex = 0x0e // uvarint n, then n bytes packed: a hex string value
	codeKey = 0x0f // one byte: the index in keys of a member name and colon
)

// minHex is the fewest hex digits worth storing as bytes.
const minHex = 8

// Packing of the bytes of a hex value: a control byte c below packZeros is
// followed by c+1 literal bytes; from packZeros up it stands for
// c-packZeros+1 zero bytes.
const (
	packZeros = 0x80
	packMax   = 0x80 // longest run of either kind
)

// keys are the member names of geth's blocks, transactions, receipts and
// logs, and common L2 additions. Stored data refers to them by index:
// append only.
var keys = []string{
	"address", "blockHash", "blockNumber", "blockTimestamp", "data", "logIndex", "removed",
	"topics", "transactionHash", "transactionIndex", "chainId", "from", "gas", "gasPrice",
	"maxFeePerGas", "maxPriorityFeePerGas", "hash", "input", "nonce", "to", "value", "type",
	"accessList", "storageKeys", "v", "r", "s", "yParity", "contractAddress",
	"cumulativeGasUsed", "effectiveGasPrice", "gasUsed", "logs", "logsBloom", "status",
	"baseFeePerGas", "blobGasUsed", "difficulty", "excessBlobGas", "extraData", "gasLimit",
	"miner", "mixHash", "number", "parentBeaconBlockRoot", "parentHash", "receiptsRoot",
	"requestsHash", "sha3Uncles", "size", "stateRoot", "timestamp", "totalDifficulty",
	"transactions", "transactionsRoot", "uncles", "withdrawals", "withdrawalsRoot", "index",
	"validatorIndex", "amount", "maxFeePerBlobGas", "blobVersionedHashes", "blobGasPrice",
	"authorizationList", "root", "l1Fee", "l1GasPrice", "l1GasUsed", "l1FeeScalar",
	"l1BaseFeeScalar", "l1BlobBaseFee", "l1BlobBaseFeeScalar", "depositNonce",
	"depositReceiptVersion", "sourceHash", "mint", "isSystemTx", "gasUsedForL1",
	"l1BlockNumber", "sendCount", "sendRoot",
}

// keyIndex maps `"name":` to its index in keys.
var keyIndex = func() map[string]byte {
	m := make(map[string]byte, len(keys))
	for i, k := range keys {
		m[`"`+k+`":`] = byte(i)
	}
	return m
}()

// slotOf maps a byte to its slot, -1 for every other byte.
var slotOf = func() (m [256]int8) {
	for i := range m {
		m[i] = -1
	}
	for s, c := range codes {
		m[c] = int8(s)
	}
	return m
}()

// dict holds the quoted JSON strings of the slots; nil slots are unused.
type dict [nSlots][]byte

// errMalformed: a stored row or a caller's filter is not what the store
// reads. Not a Postgres failure.
var errMalformed = errors.New("malformed")

var (
	errControl = errors.New("control character outside a JSON string's escapes")
	errStored  = fmt.Errorf("%w: stored JSON is damaged", errMalformed)
)

// squeeze appends raw, encoded, to dst.
func squeeze(dst, raw []byte, d *dict) ([]byte, error) {
	for _, c := range raw {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return nil, errControl
		}
	}
	i := 0
	for {
		j := bytes.IndexByte(raw[i:], '"')
		if j < 0 {
			return append(dst, raw[i:]...), nil
		}
		start := i + j
		end := jsonscan.String(raw, start)
		dst = append(dst, raw[i:start]...)
		tok := raw[start:end]
		i = end
		if k := jsonscan.SkipSpace(raw, end); k < len(raw) && raw[k] == ':' {
			// A member name.
			if k == end {
				if idx, ok := keyIndex[string(raw[start:end+1])]; ok {
					dst = append(dst, codeKey, idx)
					i = end + 1
					continue
				}
			}
			dst = append(dst, tok...)
			continue
		}
		if code := slotCode(tok, d); code != 0 {
			dst = append(dst, code)
		} else if isLowerHex(tok) {
			dst = packHex(dst, tok[3:len(tok)-1])
		} else {
			dst = append(dst, tok...)
		}
	}
}

func slotCode(tok []byte, d *dict) byte {
	for s := range d {
		if v := d[s]; len(v) == len(tok) && string(v) == string(tok) {
			return codes[s]
		}
	}
	return 0
}

// isLowerHex reports a quoted string of 0x and an even number, at least
// minHex, of lowercase hex digits.
func isLowerHex(tok []byte) bool {
	n := len(tok) - 4
	if n < minHex || n%2 != 0 || tok[1] != '0' || tok[2] != 'x' {
		return false
	}
	for _, c := range tok[3 : len(tok)-1] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// packHex appends codeHex, the byte count and the packed bytes of the hex
// digits h.
func packHex(dst, h []byte) []byte {
	n := len(h) / 2
	dst = append(dst, codeHex)
	dst = binary.AppendUvarint(dst, uint64(n))
	var buf [512]byte // hashes, addresses and blooms fit
	b := buf[:0]
	if n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = b[:n]
	_, _ = hex.Decode(b, h) // checked by isLowerHex
	for len(b) > 0 {
		z := 0
		for z < len(b) && z < packMax && b[z] == 0 {
			z++
		}
		if z > 0 {
			dst = append(dst, byte(packZeros+z-1))
			b = b[z:]
			continue
		}
		// Literal bytes up to the next run of two zeros, which is cheaper
		// as a run.
		l := 1
		for l < len(b) && l < packMax && !(b[l] == 0 && l+1 < len(b) && b[l+1] == 0) {
			l++
		}
		dst = append(dst, byte(l-1))
		dst = append(dst, b[:l]...)
		b = b[l:]
	}
	return dst
}

// expand appends stored, decoded, to dst.
func expand(dst, stored []byte, d *dict) ([]byte, error) {
	last := 0
	for i := 0; i < len(stored); i++ {
		c := stored[i]
		if c >= 0x20 || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		dst = append(dst, stored[last:i]...)
		switch {
		case slotOf[c] >= 0:
			dst = append(dst, d[slotOf[c]]...)
		case c == codeKey && i+1 < len(stored) && int(stored[i+1]) < len(keys):
			i++
			dst = append(dst, '"')
			dst = append(dst, keys[stored[i]]...)
			dst = append(dst, '"', ':')
		case c == codeHex:
			var err error
			if dst, i, err = unpackHex(dst, stored, i+1); err != nil {
				return nil, err
			}
			i--
		default:
			return nil, errStored
		}
		last = i + 1
	}
	return append(dst, stored[last:]...), nil
}

// unpackHex appends the quoted hex of the packed bytes at stored[i:] and
// returns the offset past them.
func unpackHex(dst, stored []byte, i int) ([]byte, int, error) {
	n, k := binary.Uvarint(stored[i:])
	if k <= 0 || n > uint64(len(stored))*packMax {
		return nil, 0, errStored
	}
	i += k
	dst = append(dst, '"', '0', 'x')
	for n > 0 {
		if i >= len(stored) {
			return nil, 0, errStored
		}
		c := stored[i]
		i++
		if c >= packZeros {
			z := uint64(c-packZeros) + 1
			if z > n {
				return nil, 0, errStored
			}
			for range z {
				dst = append(dst, '0', '0')
			}
			n -= z
			continue
		}
		l := int(c) + 1
		if uint64(l) > n || i+l > len(stored) {
			return nil, 0, errStored
		}
		dst = hex.AppendEncode(dst, stored[i:i+l])
		i += l
		n -= uint64(l)
	}
	return append(dst, '"'), i, nil
}

// quoteHex appends b as a quoted 0x-prefixed lowercase hex string.
func quoteHex(dst, b []byte) []byte {
	dst = append(dst, '"', '0', 'x')
	dst = hex.AppendEncode(dst, b)
	return append(dst, '"')
}

// quoteQuantity appends n as a quoted hex quantity, as geth writes it.
func quoteQuantity(dst []byte, n uint64) []byte {
	dst = append(dst, '"', '0', 'x')
	dst = strconv.AppendUint(dst, n, 16)
	return append(dst, '"')
}

// quote returns s in quotes.
func quote(s string) []byte {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// unhex decodes a 0x-prefixed hex string of n bytes.
func unhex(s string, n int) ([]byte, error) {
	if len(s) != 2+2*n || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return nil, fmt.Errorf("%.80q is not %d bytes of hex", s, n)
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, fmt.Errorf("%.80q: %w", s, err)
	}
	return b, nil
}

// span returns the offsets of the value of member key in the object obj,
// or ok false when obj has none.
func span(obj []byte, key string) (start, end int, ok bool) {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false
	}
	it := jsonscan.Object{Data: obj, I: i + 1}
	for {
		k, v, ok := it.Next()
		if !ok {
			return 0, 0, false
		}
		if string(k) == key {
			return it.I - len(v), it.I, true
		}
	}
}

// isJoin reports whether arr is exactly '[' + the parts joined by ',' + ']':
// the array can then be rebuilt from its parts.
func isJoin(arr []byte, parts [][]byte) bool {
	n := 2
	for i, p := range parts {
		n += len(p)
		if i > 0 {
			n++
		}
	}
	if len(arr) != n || arr[0] != '[' || arr[n-1] != ']' {
		return false
	}
	i := 1
	for k, p := range parts {
		if k > 0 {
			if arr[i] != ',' {
				return false
			}
			i++
		}
		if !bytes.Equal(arr[i:i+len(p)], p) {
			return false
		}
		i += len(p)
	}
	return true
}

// splice appends obj to dst with the members' array at [start, end)
// replaced by '[' + the parts joined by ',' + ']'.
func splice(dst, obj []byte, start, end int, parts [][]byte) []byte {
	dst = append(dst, obj[:start]...)
	dst = append(dst, '[')
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, p...)
	}
	dst = append(dst, ']')
	return append(dst, obj[end:]...)
}
