package headstore

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/jsonscan"
)

// The window answers a call only when it can give exactly the node's
// answer, so its parameter parsing is geth's (v1.17.10), not venn's usual
// leniency: quantities with leading zeros, escaped strings, params of the
// wrong count or type, keys that encoding/json would fold onto a filter
// field, all go to the node, which produces its own error or answer.
// evm.ParseBlockRef and evm.ParseQuantity accept some of those, hence the
// stricter readers here.

// Limits geth applies to eth_getLogs filters (eth/filters/api.go and
// ethconfig.Defaults); a filter past them gets geth's error, so the window
// forwards it.
const (
	maxFilterTopics = 4    // maxTopics: positions
	maxSubTopics    = 1000 // maxSubTopics: alternatives at one position
	logQueryLimit   = 1000 // --rpc.logquerylimit default: addresses, and alternatives per position
)

// Fixed answers. Results are never written to by callers (they are the
// remotes' own bytes), so these are shared.
var (
	resultNull      = json.RawMessage("null")
	resultEmptyList = json.RawMessage("[]")
)

// Answer answers a call from the window when it can: res is the node's own
// bytes (sub-slices of what the remotes sent, or small encodings like a hex
// quantity or null). ok is false when the window cannot answer exactly what
// the node would (unknown method, block below the window, a tag it does not
// know, malformed or unusual params — the node produces those errors), and
// the router forwards the call upstream.
//
// params must be syntactically valid JSON (the jrpc decoder checks it) or
// nil. res must not be modified: it shares memory with the window.
func (w *Window) Answer(method string, params json.RawMessage) (res json.RawMessage, ok bool) {
	switch method {
	case "eth_blockNumber":
		return w.answerBlockNumber(params)
	case "eth_getBlockByNumber":
		return w.answerBlock(params, false)
	case "eth_getBlockByHash":
		return w.answerBlock(params, true)
	case "eth_getBlockReceipts":
		return w.answerBlockReceipts(params)
	case "eth_getTransactionByHash":
		return w.answerTx(params, false)
	case "eth_getTransactionReceipt":
		return w.answerTx(params, true)
	case "eth_getTransactionByBlockNumberAndIndex":
		return w.answerTxByIndex(params, false)
	case "eth_getTransactionByBlockHashAndIndex":
		return w.answerTxByIndex(params, true)
	case "eth_getBlockTransactionCountByNumber":
		return w.answerCount(params, false, txCount)
	case "eth_getBlockTransactionCountByHash":
		return w.answerCount(params, true, txCount)
	case "eth_getUncleCountByBlockNumber":
		return w.answerCount(params, false, uncleCount)
	case "eth_getUncleCountByBlockHash":
		return w.answerCount(params, true, uncleCount)
	case "eth_getLogs":
		return w.answerLogs(params)
	}
	return nil, false
}

// answerBlockNumber answers the head, never below what this replica has
// answered before: after a reorg to a shorter chain the number holds until
// the chain grows past it.
func (w *Window) answerBlockNumber(params []byte) (json.RawMessage, bool) {
	if !positional(params, nil) {
		return nil, false
	}
	head := w.latest.Load()
	if head == 0 {
		return nil, false
	}
	return quantityJSON(w.Monotonic(head)), true
}

// Monotonic returns the highest of n and every head this replica has
// answered, and records it: eth_blockNumber never goes backwards for a
// client, even across a reorg to a shorter chain or a forwarded answer
// from a lagging remote.
func (w *Window) Monotonic(n uint64) uint64 {
	for {
		served := w.served.Load()
		if served >= n {
			return served
		}
		if w.served.CompareAndSwap(served, n) {
			return n
		}
	}
}

// answerBlock: eth_getBlockByNumber(number, full), eth_getBlockByHash(hash, full).
func (w *Window) answerBlock(params []byte, byHash bool) (json.RawMessage, bool) {
	var a [2][]byte
	if !positional(params, a[:]) {
		return nil, false
	}
	var full bool
	switch string(a[1]) {
	case "true":
		full = true
	case "false":
	default:
		// geth takes null as false; unusual enough to leave to it.
		return nil, false
	}
	e, ok := w.blockArg(a[0], byHash)
	switch {
	case !ok:
		return nil, false
	case e == nil:
		return resultNull, true
	case full:
		return e.Raw, true
	default:
		return e.hashOnly, true
	}
}

// answerBlockReceipts: eth_getBlockReceipts(number, tag, hash or EIP-1898
// object), the receipts exactly as the remote sent them.
func (w *Window) answerBlockReceipts(params []byte) (json.RawMessage, bool) {
	var a [1][]byte
	if !positional(params, a[:]) {
		return nil, false
	}
	var key [hashLen]byte
	ref, ok := blockNumberOrHash(a[0], &key)
	if !ok {
		return nil, false
	}
	w.mu.RLock()
	e, future, ok := w.resolve(ref, &key)
	w.mu.RUnlock()
	switch {
	case !ok:
		return nil, false
	case future:
		return resultNull, true
	}
	return e.Receipts, true
}

// answerTx: eth_getTransactionByHash(hash), eth_getTransactionReceipt(hash).
// A hash the window does not hold may be older, pending, or unknown: the
// node knows which.
func (w *Window) answerTx(params []byte, receipt bool) (json.RawMessage, bool) {
	var a [1][]byte
	if !positional(params, a[:]) {
		return nil, false
	}
	var key [hashLen]byte
	if !hashParam(a[0], &key) {
		return nil, false
	}
	w.mu.RLock()
	loc, ok := w.byTx[string(key[:])]
	w.mu.RUnlock()
	if !ok {
		return nil, false
	}
	if receipt {
		return loc.e.receipts[loc.i], true
	}
	return loc.e.txs[loc.i], true
}

// answerTxByIndex: eth_getTransactionByBlock{Number,Hash}AndIndex(block,
// index). geth answers null for an index past the block's transactions.
func (w *Window) answerTxByIndex(params []byte, byHash bool) (json.RawMessage, bool) {
	var a [2][]byte
	if !positional(params, a[:]) {
		return nil, false
	}
	s, ok := plainString(a[1])
	if !ok {
		return nil, false
	}
	i, ok := hexQuantity(s)
	if !ok {
		return nil, false
	}
	e, ok := w.blockArg(a[0], byHash)
	switch {
	case !ok:
		return nil, false
	case e == nil || i >= uint64(len(e.txs)):
		return resultNull, true
	}
	return e.txs[i], true
}

// answerCount: eth_get{BlockTransaction,Uncle}CountBy{Number,Hash}.
func (w *Window) answerCount(params []byte, byHash bool, count func(*entry) (uint64, bool)) (json.RawMessage, bool) {
	var a [1][]byte
	if !positional(params, a[:]) {
		return nil, false
	}
	e, ok := w.blockArg(a[0], byHash)
	switch {
	case !ok:
		return nil, false
	case e == nil:
		return resultNull, true
	}
	n, ok := count(e)
	if !ok {
		return nil, false
	}
	return quantityJSON(n), true
}

func txCount(e *entry) (uint64, bool) { return uint64(len(e.txs)), true }

// uncleCount counts the block's uncles array; the hash-only form is the
// shorter one to scan.
func uncleCount(e *entry) (uint64, bool) {
	u := jsonscan.Member(e.hashOnly, "uncles")
	if len(u) == 0 || u[0] != '[' {
		return 0, false
	}
	it := jsonscan.Array{Data: u, I: 1}
	var n uint64
	for {
		if _, ok := it.Next(); !ok {
			return n, true
		}
		n++
	}
}

// blockArg reads a block argument as geth does (a number or tag as
// rpc.BlockNumber, or a hash as common.Hash) and finds it in the window.
// e is nil with ok true for a number above the head, which geth answers
// with null.
func (w *Window) blockArg(raw []byte, byHash bool) (e *entry, ok bool) {
	var ref evm.BlockRef
	var key [hashLen]byte
	if byHash {
		if !hashParam(raw, &key) {
			return nil, false
		}
		ref = evm.BlockRef{Kind: evm.RefHash}
	} else if ref, ok = blockNumber(raw); !ok {
		return nil, false
	}
	w.mu.RLock()
	e, future, ok := w.resolve(ref, &key)
	w.mu.RUnlock()
	if future {
		return nil, true
	}
	return e, ok
}

// resolve finds ref's canonical entry; the caller holds mu. future is set
// (with ok) for a number above the head. For a hash ref, key holds the
// lowercase hash (ref.Hash is not read, so callers need not allocate it).
func (w *Window) resolve(ref evm.BlockRef, key *[hashLen]byte) (e *entry, future, ok bool) {
	if ref.Kind == evm.RefHash {
		e = w.byHash[string(key[:])]
		return e, false, e != nil
	}
	n, future, ok := w.number(ref)
	if !ok || future {
		return nil, future, ok
	}
	e = w.byNumber(n)
	return e, false, e != nil
}

// number resolves a number or tag against the window; the caller holds mu.
// future is set (with ok) for a number above the head. safe and finalized
// resolve only when known and in the window, earliest only when block 0 is
// in the window (geth resolves it to its history cutoff, 0 on a chain
// young enough to have block 0 near the head), pending never.
func (w *Window) number(ref evm.BlockRef) (n uint64, future, ok bool) {
	if len(w.canon) == 0 {
		return 0, false, false
	}
	low, head := w.canon[0].Number, w.canon[len(w.canon)-1].Number
	switch ref.Kind {
	case evm.RefLatest:
		return head, false, true
	case evm.RefSafe, evm.RefFinalized:
		n = w.safe
		if ref.Kind == evm.RefFinalized {
			n = w.finalized
		}
		// Zero is unknown; above the head, stale.
		return n, false, n != 0 && n >= low && n <= head
	case evm.RefEarliest:
		return 0, false, low == 0
	case evm.RefNumber:
		if ref.Number > head {
			return 0, true, true
		}
		return ref.Number, false, ref.Number >= low
	}
	return 0, false, false
}

// answerLogs: eth_getLogs(filter) over blocks in the window, the log
// objects of the receipts (geth's eth_getLogs objects are the same), in
// block then log index order.
func (w *Window) answerLogs(params []byte) (json.RawMessage, bool) {
	var a [1][]byte
	if !positional(params, a[:]) {
		return nil, false
	}
	var f logFilter
	if !f.parse(a[0]) {
		return nil, false
	}
	// Entries are immutable once indexed: copy the range's pointers under
	// the lock and match without it, so a long range never holds up Apply.
	var buf [8]*entry
	ents := buf[:0]
	w.mu.RLock()
	if f.byHash {
		if e := w.byHash[string(f.hash[:])]; e != nil {
			ents = append(ents, e)
		}
	} else if from, to, ok := w.logRange(&f); ok {
		low := w.canon[0].Number
		ents = append(ents, w.canon[from-low:to-low+1]...)
	}
	w.mu.RUnlock()
	if len(ents) == 0 {
		// An unknown hash, or a range the window does not cover.
		return nil, false
	}
	return f.collect(ents), true
}

// logRange resolves the filter's range as geth does; ok is false for every
// range geth refuses (from above to, beyond the head, pending) and every
// range not wholly in the window. The caller holds mu.
func (w *Window) logRange(f *logFilter) (from, to uint64, ok bool) {
	// geth checks explicit numbers before resolving tags.
	if f.from.Kind == evm.RefNumber && f.to.Kind == evm.RefNumber && f.from.Number > f.to.Number {
		return 0, 0, false
	}
	from, future, ok := w.number(f.from)
	if !ok || future {
		return 0, 0, false
	}
	to, future, ok = w.number(f.to)
	if !ok || future || from > to {
		return 0, 0, false
	}
	return from, to, true
}

// logFilter is an eth_getLogs filter, validated as geth validates it.
// Its values stay sub-slices of the params, so parsing allocates nothing.
type logFilter struct {
	from, to evm.BlockRef // RefLatest when absent
	byHash   bool
	hash     [hashLen]byte // lowercase, when byHash
	addr     criterion
	// A log with fewer topics than npos does not match, even where every
	// position is a wildcard.
	topics [maxFilterTopics]criterion
	npos   int
}

// criterion is one condition of a filter: the log's address, or its topic
// at one position, must be one of a list of values.
type criterion struct {
	raw  []byte // the JSON string or array of strings, checked; nil matches any
	vals [inlineValues][]byte
	n    int  // values in vals, without quotes; -1 when more than fit (match scans raw)
	fold bool // some value has upper-case letters: compare ignoring case
}

// inlineValues is how many values a criterion keeps split out; more are
// rare (an address list), and are matched by scanning the JSON.
const inlineValues = 4

// add records a checked, quoted value.
func (c *criterion) add(v []byte) {
	switch {
	case c.n < 0:
	case c.n < len(c.vals):
		c.vals[c.n] = v[1 : len(v)-1]
		c.n++
	default:
		c.n = -1
	}
	if !c.fold && bytes.IndexFunc(v, isUpper) >= 0 {
		c.fold = true
	}
}

func isUpper(r rune) bool { return 'A' <= r && r <= 'Z' }

// match reports whether the lowercase hex s is one of the values.
func (c *criterion) match(s string) bool {
	if c.n >= 0 {
		for _, v := range c.vals[:c.n] {
			if sameHex(v, s, c.fold) {
				return true
			}
		}
		return false
	}
	if c.raw[0] == '"' {
		return sameHex(c.raw[1:len(c.raw)-1], s, c.fold)
	}
	it := jsonscan.Array{Data: c.raw, I: 1}
	for {
		v, ok := it.Next()
		if !ok {
			return false
		}
		if sameHex(v[1:len(v)-1], s, c.fold) {
			return true
		}
	}
}

// parse reads the filter object raw the way geth's
// FilterCriteria.UnmarshalJSON and GetLogs do, false for anything they
// reject or that this reader is not sure it reads the same.
func (f *logFilter) parse(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '{' {
		// A null filter, or not an object: unusual, so the node decides.
		return false
	}
	var fromRaw, toRaw, hashRaw, addrRaw, topicsRaw []byte
	var seen uint8
	members := jsonscan.Object{Data: raw, I: 1}
	for {
		k, v, ok := members.Next()
		if !ok {
			break
		}
		var dst *[]byte
		var bit uint8
		switch string(k) {
		case "fromBlock":
			dst, bit = &fromRaw, 1
		case "toBlock":
			dst, bit = &toRaw, 2
		case "blockHash":
			dst, bit = &hashRaw, 4
		case "address":
			dst, bit = &addrRaw, 8
		case "topics":
			dst, bit = &topicsRaw, 16
		default:
			// encoding/json matches names case-insensitively (Unicode
			// folding, after unescaping): such a key would set a field.
			if !plainKey(k) || foldsToField(k) {
				return false
			}
			continue // geth ignores unknown members
		}
		if seen&bit != 0 {
			return false // a duplicate: leave precedence to geth
		}
		seen |= bit
		*dst = v
	}
	hashRaw, fromRaw, toRaw = nonNull(hashRaw), nonNull(fromRaw), nonNull(toRaw)
	f.from, f.to = evm.BlockRef{Kind: evm.RefLatest}, evm.BlockRef{Kind: evm.RefLatest}
	if hashRaw != nil {
		if fromRaw != nil || toRaw != nil || !hashParam(hashRaw, &f.hash) {
			return false
		}
		f.byHash = true
	}
	var ok bool
	if fromRaw != nil {
		if f.from, ok = blockNumber(fromRaw); !ok {
			return false
		}
	}
	if toRaw != nil {
		if f.to, ok = blockNumber(toRaw); !ok {
			return false
		}
	}
	return f.parseAddress(nonNull(addrRaw)) && f.parseTopics(nonNull(topicsRaw))
}

// parseAddress takes a string or an array of strings, each a 20-byte hex
// address; an empty array matches any address, as does none.
func (f *logFilter) parseAddress(raw []byte) bool {
	if raw == nil {
		return true
	}
	if raw[0] == '"' {
		if !isHex(raw, addressLen) {
			return false
		}
		f.addr.add(raw)
		f.addr.raw = raw
		return true
	}
	if raw[0] != '[' {
		return false
	}
	n := 0
	it := jsonscan.Array{Data: raw, I: 1}
	for {
		v, ok := it.Next()
		if !ok {
			break
		}
		if n++; n > logQueryLimit || !isHex(v, addressLen) {
			return false
		}
		f.addr.add(v)
	}
	if n > 0 {
		f.addr.raw = raw
	}
	return true
}

// parseTopics takes an array of at most four positions, each null (any), a
// topic, or an array of topics.
func (f *logFilter) parseTopics(raw []byte) bool {
	if raw == nil {
		return true
	}
	if raw[0] != '[' {
		return false
	}
	it := jsonscan.Array{Data: raw, I: 1}
	for {
		v, ok := it.Next()
		if !ok {
			return true
		}
		if f.npos == maxFilterTopics {
			return false
		}
		c := &f.topics[f.npos]
		f.npos++
		switch v[0] {
		case 'n':
		case '"':
			if !isHex(v, hashLen) {
				return false
			}
			c.add(v)
			c.raw = v
		case '[':
			if !c.parseAlternatives(v) {
				return false
			}
		default:
			return false
		}
	}
}

// parseAlternatives reads one position's array of topics. It matches any
// topic when empty or when it holds a null: geth stops reading the array
// at the null, so what follows is not checked either.
func (c *criterion) parseAlternatives(raw []byte) bool {
	// geth refuses an array over maxSubTopics before reading any of it.
	n := 0
	it := jsonscan.Array{Data: raw, I: 1}
	for {
		if _, ok := it.Next(); !ok {
			break
		}
		if n++; n > maxSubTopics || n > logQueryLimit {
			return false
		}
	}
	it = jsonscan.Array{Data: raw, I: 1}
	for {
		v, ok := it.Next()
		if !ok {
			if n > 0 {
				c.raw = raw
			}
			return true
		}
		if v[0] == 'n' {
			*c = criterion{}
			return true
		}
		if !isHex(v, hashLen) {
			return false
		}
		c.add(v)
	}
}

// match is geth's filterLogs check for one log.
func (f *logFilter) match(l *Log) bool {
	if f.addr.raw != nil && !f.addr.match(l.Address) {
		return false
	}
	if f.npos > len(l.Topics) {
		return false
	}
	for i := range f.npos {
		if c := &f.topics[i]; c.raw != nil && !c.match(l.Topics[i]) {
			return false
		}
	}
	return true
}

// collect joins the matching logs of ents into a JSON array.
func (f *logFilter) collect(ents []*entry) json.RawMessage {
	unfiltered := f.addr.raw == nil && f.npos == 0
	size := 1
	for _, e := range ents {
		for i := range e.logs {
			size += len(e.logs[i].Raw) + 1
		}
	}
	var out []byte
	for _, e := range ents {
		for i := range e.logs {
			l := &e.logs[i]
			if !unfiltered && !f.match(l) {
				continue
			}
			if out == nil {
				// Exact when unfiltered; otherwise a bound, capped so a
				// selective filter over a long range does not over-allocate.
				if !unfiltered {
					size = min(size, max(16<<10, 2*len(l.Raw)+2))
				}
				out = make([]byte, 0, size)
				out = append(out, '[')
			} else {
				out = append(out, ',')
			}
			out = append(out, l.Raw...)
		}
	}
	if out == nil {
		return resultEmptyList
	}
	return append(out, ']')
}

// sameHex compares the hex v with the lowercase s, ignoring v's case when
// fold is set.
func sameHex(v []byte, s string, fold bool) bool {
	if !fold {
		return string(v) == s
	}
	if len(v) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// Lengths of 0x-prefixed hex strings.
const (
	hashLen    = 2 + 64
	addressLen = 2 + 40
)

// positional splits params into exactly len(out) positional arguments, as
// geth requires (it refuses both missing and extra ones; absent or null
// params are no arguments). Named params are left to the node.
func positional(params []byte, out [][]byte) bool {
	i := jsonscan.SkipSpace(params, 0)
	if i >= len(params) || params[i] == 'n' {
		return len(out) == 0
	}
	if params[i] != '[' {
		return false
	}
	it := jsonscan.Array{Data: params, I: i + 1}
	n := 0
	for {
		v, ok := it.Next()
		if !ok {
			return n == len(out)
		}
		if n == len(out) {
			return false
		}
		out[n] = v
		n++
	}
}

// blockNumber reads a param as geth's rpc.BlockNumber: a tag or a hex
// quantity without leading zeros, at most MaxInt64.
func blockNumber(raw []byte) (evm.BlockRef, bool) {
	s, ok := plainString(raw)
	if !ok {
		return evm.BlockRef{}, false
	}
	if k, ok := tag(s); ok {
		return evm.BlockRef{Kind: k}, true
	}
	n, ok := hexQuantity(s)
	if !ok || n > math.MaxInt64 {
		return evm.BlockRef{}, false
	}
	return evm.BlockRef{Kind: evm.RefNumber, Number: n}, true
}

// blockNumberOrHash reads a param as geth's rpc.BlockNumberOrHash: a tag,
// a number, a 66-character hash, or an EIP-1898 object. A hash is put in
// key, lowercase.
func blockNumberOrHash(raw []byte, key *[hashLen]byte) (evm.BlockRef, bool) {
	if len(raw) > 0 && raw[0] == '{' {
		return blockObject(raw, key)
	}
	s, ok := plainString(raw)
	if !ok {
		return evm.BlockRef{}, false
	}
	if len(s) == hashLen {
		if !hashParam(raw, key) {
			return evm.BlockRef{}, false
		}
		return evm.BlockRef{Kind: evm.RefHash}, true
	}
	return blockNumber(raw)
}

// blockObject reads an EIP-1898 object with encoding/json, as geth does,
// so that member names match the same way; it is rare, so it may allocate.
func blockObject(raw []byte, key *[hashLen]byte) (evm.BlockRef, bool) {
	var obj struct {
		BlockNumber      *json.RawMessage `json:"blockNumber"`
		BlockHash        *json.RawMessage `json:"blockHash"`
		RequireCanonical *json.RawMessage `json:"requireCanonical"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return evm.BlockRef{}, false
	}
	if rc := obj.RequireCanonical; rc != nil && string(*rc) != "true" && string(*rc) != "false" {
		return evm.BlockRef{}, false
	}
	switch {
	case obj.BlockNumber != nil && obj.BlockHash != nil:
		return evm.BlockRef{}, false
	case obj.BlockNumber != nil:
		return blockNumber(*obj.BlockNumber)
	case obj.BlockHash != nil:
		// The window holds only canonical blocks, so requireCanonical
		// changes nothing for a hash it finds.
		if !hashParam(*obj.BlockHash, key) {
			return evm.BlockRef{}, false
		}
		return evm.BlockRef{Kind: evm.RefHash}, true
	}
	return evm.BlockRef{}, false
}

func tag(s []byte) (evm.RefKind, bool) {
	switch string(s) {
	case "latest":
		return evm.RefLatest, true
	case "safe":
		return evm.RefSafe, true
	case "finalized":
		return evm.RefFinalized, true
	case "earliest":
		return evm.RefEarliest, true
	case "pending":
		return evm.RefPending, true
	}
	return 0, false
}

// hashParam reads a 32-byte hex string (0x or 0X, any case) into key,
// lowercased for the window's maps.
func hashParam(raw []byte, key *[hashLen]byte) bool {
	if !isHex(raw, hashLen) {
		return false
	}
	key[0], key[1] = '0', 'x'
	for i := 2; i < hashLen; i++ {
		c := raw[i+1]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		key[i] = c
	}
	return true
}

// isHex reports whether raw is a JSON string of n characters: 0x or 0X and
// hex digits of any case (geth's hexutil rules for fixed-size values).
func isHex(raw []byte, n int) bool {
	if len(raw) != n+2 || raw[0] != '"' || raw[n+1] != '"' {
		return false
	}
	s := raw[1 : n+1]
	if s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return false
	}
	for _, c := range s[2:] {
		if unhex(c) > 15 {
			return false
		}
	}
	return true
}

// hexQuantity reads geth's hexutil quantity: 0x or 0X, 1 to 16 digits,
// no leading zero.
func hexQuantity(s []byte) (uint64, bool) {
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return 0, false
	}
	d := s[2:]
	if len(d) > 16 || (len(d) > 1 && d[0] == '0') {
		return 0, false
	}
	var n uint64
	for _, c := range d {
		v := unhex(c)
		if v > 15 {
			return 0, false
		}
		n = n<<4 | uint64(v)
	}
	return n, true
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// plainString returns the contents of a JSON string that has no escapes.
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	return s, true
}

func nonNull(v []byte) []byte {
	if string(v) == "null" {
		return nil
	}
	return v
}

// plainKey reports a member name of printable ASCII without escapes.
func plainKey(k []byte) bool {
	for _, c := range k {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

// foldsToField reports an ASCII name that encoding/json would match to a
// filter field though it is not spelled exactly.
func foldsToField(k []byte) bool {
	for _, name := range [...]string{"fromBlock", "toBlock", "blockHash", "address", "topics"} {
		if bytes.EqualFold(k, []byte(name)) {
			return true
		}
	}
	return false
}

// quantityJSON encodes n as a quoted hex quantity.
func quantityJSON(n uint64) json.RawMessage {
	b := make([]byte, 0, 2+2+16)
	b = append(b, '"', '0', 'x')
	b = strconv.AppendUint(b, n, 16)
	return append(b, '"')
}
