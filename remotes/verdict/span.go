package verdict

// Span parsing: the block span a range or result cap says works, read from
// the error's text (the catalogue's §3.8), so that a split asks for pieces
// the remote serves.

import "strings"

// suggestedSpan reads the block span a too-large error suggests: a hinted
// range first (Infura, Alchemy, reth/dRPC), then, for range caps only, the
// cap the message names. Result caps name a log count, never a span.
func suggestedSpan(text string, isRange bool) uint64 {
	for _, key := range []string{"try with this block range", "this block range should work"} {
		if i := strings.Index(text, key); i >= 0 {
			if n := bracketSpan(text[i+len(key):]); n > 0 {
				return n
			}
		}
	}
	if i := strings.Index(text, "retry with the range "); i >= 0 {
		rest := text[i+len("retry with the range "):]
		from, rest, ok := number(rest)
		if ok && strings.HasPrefix(rest, "-") {
			if to, _, ok := number(rest[1:]); ok && to >= from {
				return to - from + 1
			}
		}
	}
	if n := dataSpan(text); n > 0 {
		return n
	}
	if !isRange {
		return 0
	}
	if i := strings.Index(text, "for your plan ("); i >= 0 { // BlastAPI "(asked > cap)"
		if j := strings.Index(text[i:], " > "); j >= 0 {
			if n, _, ok := number(text[i+j+len(" > "):]); ok {
				return n
			}
		}
	}
	for _, key := range capKeys {
		if i := strings.Index(text, key); i >= 0 {
			if n, _, ok := number(text[i+len(key):]); ok && n > 0 {
				return n
			}
		}
	}
	return 0
}

// earliestNamed reads the earliest block a pruned remote's error says it
// has: reth's "earliest available 100", Arbitrum's "earliest available is
// 100", Erigon's "lowest height is 100"; 0 when it names none.
func earliestNamed(text string) uint64 {
	for _, key := range []string{"earliest available block", "earliest available", "lowest height is"} {
		if i := strings.Index(text, key); i >= 0 {
			rest := strings.TrimPrefix(text[i+len(key):], " is")
			if n, _, ok := number(rest); ok {
				return n
			}
		}
	}
	return 0
}

// capKeys precede the cap in range errors; specific keys before the general
// "maximum", so "maximum allowed is 1000" is not read at "maximum allowed".
var capKeys = []string{
	"maximum is set to",                             // Avalanche
	"maximum allowed number of requested blocks is", // thirdweb
	"maximum allowed is",                            // Sei
	"limit the query to at most",                    // Coinbase
	"max range",                                     // Cloudflare, cdk-erigon
	"up to a",                                       // Alchemy free tier
	"limited to a",                                  // QuickNode
	"limited to",                                    // BlockPI
	"max is",                                        // Merkle "1k"
	"maximum block range",                           // geth, BSC, publicnode
	"max block range",                               // reth
	"range limit",                                   // Tenderly
	"exceeds limit of",                              // Infura
	"ranges over",                                   // dRPC
	"blocks distance",                               // Ankr TAC
	"block range greater than",                      // proxyd
	"block range exceeds",
	"maximum", // Moonbeam "(maximum 1024)"
}

// bracketSpan parses "[from, to]" (hex or decimal, after optional ": ").
func bracketSpan(s string) uint64 {
	s = strings.TrimLeft(s, " :")
	if !strings.HasPrefix(s, "[") {
		return 0
	}
	from, rest, ok := number(s[1:])
	if !ok {
		return 0
	}
	rest = strings.TrimLeft(rest, " ,")
	to, rest, ok := number(rest)
	if !ok || to < from || !strings.HasPrefix(strings.TrimLeft(rest, " "), "]") {
		return 0
	}
	return to - from + 1
}

// dataSpan reads Infura's data {"from":"0x..","to":"0x..",...}.
func dataSpan(text string) uint64 {
	from, ok := jsonNumber(text, `"from":`)
	if !ok {
		return 0
	}
	to, ok := jsonNumber(text, `"to":`)
	if !ok || to < from {
		return 0
	}
	return to - from + 1
}

func jsonNumber(text, key string) (uint64, bool) {
	i := strings.Index(text, key)
	if i < 0 {
		return 0, false
	}
	n, _, ok := number(strings.TrimLeft(text[i+len(key):], ` "`))
	return n, ok
}

// number parses a leading block number after optional spaces, colons or
// '=': hex with 0x, or decimal with thousands commas and an optional k
// ("1k", "10,000"). It returns the rest of s.
func number(s string) (uint64, string, bool) {
	s = strings.TrimLeft(s, " :=")
	const maxDigits, maxHexDigits = 19, 16 // always fit a uint64
	if strings.HasPrefix(s, "0x") {
		i, n := 2, uint64(0)
		for ; i < len(s) && i-2 < maxHexDigits; i++ {
			d, ok := hexDigit(s[i])
			if !ok {
				break
			}
			n = n<<4 | uint64(d)
		}
		if i == 2 {
			return 0, s, false
		}
		return n, s[i:], true
	}
	i, digits, n := 0, 0, uint64(0)
	for ; i < len(s) && digits < maxDigits; i++ {
		c := s[i]
		if c == ',' && digits > 0 && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9' {
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
		digits++
	}
	if digits == 0 {
		return 0, s, false
	}
	if i < len(s) && s[i] == 'k' && (i+1 == len(s) || !isLetter(s[i+1])) {
		n *= 1000
		i++
	}
	if i < len(s) && isLetter(s[i]) {
		return 0, s, false // "10kb", "5s": not a block count
	}
	return n, s[i:], true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' }
