package evm

import (
	"bytes"
	"iter"

	"github.com/venn-gateway/venn/jsonscan"
)

// Limits geth applies to eth_getLogs filters (eth/filters/api.go and
// ethconfig.Defaults); a filter past them gets geth's error, so Parse
// refuses it.
const (
	MaxFilterTopics = 4    // maxTopics: positions
	maxSubTopics    = 1000 // maxSubTopics: alternatives at one position
	LogQueryLimit   = 1000 // --rpc.logquerylimit default: addresses, and alternatives per position
)

// ErrLogQueryLimit is geth's message for a filter over its
// --rpc.logquerylimit; clients that split their filters look for it.
const ErrLogQueryLimit = "exceed max addresses or topics per search position"

// LogFilter is an eth_getLogs filter, read and matched exactly as geth
// does. Its values stay sub-slices of the params, so parsing allocates
// nothing. Every store that answers eth_getLogs itself uses this one.
type LogFilter struct {
	From, To BlockRef // RefLatest when absent
	ByHash   bool
	Hash     [HashLen]byte // lowercase, when ByHash
	Address  Criterion
	// Topics holds the first NTopics positions. A log with fewer topics
	// than NTopics does not match, even where every position is a wildcard.
	Topics  [MaxFilterTopics]Criterion
	NTopics int
}

// Criterion is one condition of a filter: the log's address, or its topic
// at one position, must be one of a list of values.
type Criterion struct {
	raw  []byte // the JSON string or array of strings, checked; nil matches any
	vals [inlineValues][]byte
	n    int  // values in vals, without quotes; -1 when more than fit (match scans raw)
	fold bool // some value has upper-case letters: compare ignoring case
}

// inlineValues is how many values a criterion keeps split out; more are
// rare (an address list), and are matched by scanning the JSON.
const inlineValues = 4

// Any reports whether c matches every value.
func (c *Criterion) Any() bool { return c.raw == nil }

// Len is the number of c's values (0 when it matches any).
func (c *Criterion) Len() int {
	if c.n >= 0 {
		return c.n
	}
	n := 0
	for range c.Values() {
		n++
	}
	return n
}

// Values yields c's values as sent: 0x-prefixed hex of any case, without
// quotes. It yields nothing when c matches any value.
func (c *Criterion) Values() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		switch {
		case c.raw == nil:
		case c.n >= 0:
			for _, v := range c.vals[:c.n] {
				if !yield(v) {
					return
				}
			}
		case c.raw[0] == '"':
			yield(c.raw[1 : len(c.raw)-1])
		default:
			it := jsonscan.Array{Data: c.raw, I: 1}
			for {
				v, ok := it.Next()
				if !ok || !yield(v[1:len(v)-1]) {
					return
				}
			}
		}
	}
}

// add records a checked, quoted value.
func (c *Criterion) add(v []byte) {
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

// Match reports whether the lowercase hex s is one of c's values; it does
// not check Any.
func (c *Criterion) Match(s string) bool {
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

// MatchTopics is geth's filterLogs check of a log's topics (lowercase hex)
// against topic positions: each position matches (or is any), and a log
// with fewer topics than positions does not match.
func MatchTopics(positions []Criterion, topics []string) bool {
	if len(positions) > len(topics) {
		return false
	}
	for i := range positions {
		if c := &positions[i]; c.raw != nil && !c.Match(topics[i]) {
			return false
		}
	}
	return true
}

// Parse reads the filter object raw the way geth's
// FilterCriteria.UnmarshalJSON and GetLogs do, false for anything they
// reject or that this reader is not sure it reads the same.
func (f *LogFilter) Parse(raw []byte) bool {
	*f = LogFilter{}
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
	f.From, f.To = BlockRef{Kind: RefLatest}, BlockRef{Kind: RefLatest}
	if hashRaw != nil {
		if fromRaw != nil || toRaw != nil || !ArgHash(hashRaw, &f.Hash) {
			return false
		}
		f.ByHash = true
	}
	var ok bool
	if fromRaw != nil {
		if f.From, ok = ArgBlockNumber(fromRaw); !ok {
			return false
		}
	}
	if toRaw != nil {
		if f.To, ok = ArgBlockNumber(toRaw); !ok {
			return false
		}
	}
	return f.parseAddress(nonNull(addrRaw)) && f.parseTopics(nonNull(topicsRaw))
}

// parseAddress takes a string or an array of strings, each a 20-byte hex
// address; an empty array matches any address, as does none.
func (f *LogFilter) parseAddress(raw []byte) bool {
	if raw == nil {
		return true
	}
	if raw[0] == '"' {
		if !isHex(raw, AddressLen) {
			return false
		}
		f.Address.add(raw)
		f.Address.raw = raw
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
		if n++; n > LogQueryLimit || !isHex(v, AddressLen) {
			return false
		}
		f.Address.add(v)
	}
	if n > 0 {
		f.Address.raw = raw
	}
	return true
}

// parseTopics takes an array of at most four positions, each null (any), a
// topic, or an array of topics.
func (f *LogFilter) parseTopics(raw []byte) bool {
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
		if f.NTopics == MaxFilterTopics {
			return false
		}
		c := &f.Topics[f.NTopics]
		f.NTopics++
		switch v[0] {
		case 'n':
		case '"':
			if !isHex(v, HashLen) {
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
func (c *Criterion) parseAlternatives(raw []byte) bool {
	// geth refuses an array over maxSubTopics before reading any of it.
	n := 0
	it := jsonscan.Array{Data: raw, I: 1}
	for {
		if _, ok := it.Next(); !ok {
			break
		}
		if n++; n > maxSubTopics || n > LogQueryLimit {
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
			*c = Criterion{}
			return true
		}
		if !isHex(v, HashLen) {
			return false
		}
		c.add(v)
	}
}

// Unfiltered reports a filter that matches every log.
func (f *LogFilter) Unfiltered() bool { return f.Address.raw == nil && f.NTopics == 0 }

// Match is geth's filterLogs check for one log; address and topics are
// lowercase hex.
func (f *LogFilter) Match(address string, topics []string) bool {
	if f.Address.raw != nil && !f.Address.Match(address) {
		return false
	}
	return MatchTopics(f.Topics[:f.NTopics], topics)
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
