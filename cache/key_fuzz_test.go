package cache

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
)

// fuzzSettled is the settled line of the fuzz's chain; the head window
// knows the hashes of the numbers above it, up to fuzzHead.
const (
	fuzzSettled = 150
	fuzzHead    = fuzzSettled + 64
)

// fuzzView: numbers above the settled line have made-up canonical hashes.
type fuzzView struct{}

func (fuzzView) Settled() (uint64, bool) { return fuzzSettled, true }

func (fuzzView) CanonicalHash(n uint64) (string, bool) {
	if n <= fuzzSettled || n > fuzzHead {
		return "", false
	}
	return fmt.Sprintf("0x%064x", n), true
}

func (fuzzView) SettledHash(_ context.Context, n uint64) (string, bool) {
	return fmt.Sprintf("0x5e%062x", n), n <= fuzzSettled
}

func (fuzzView) CanonicalNumber(hash string) (uint64, bool) {
	var n uint64
	if _, err := fmt.Sscanf(hash, "0x%x", &n); err != nil || n <= fuzzSettled || n > fuzzHead || hash != fmt.Sprintf("0x%064x", n) {
		return 0, false
	}
	return n, true
}

// fuzzCall is what one call means; spell writes it in one of many ways.
type fuzzCall struct {
	method string
	addr   [20]byte
	data   []byte
	value  uint64
	from   bool
	block  uint64
	slot   uint64
	state  bool // an eth_call state override
}

// Spelling bits: each changes only how the call is written.
const (
	spellUpperAddr = 1 << iota
	spellUpperPrefix
	spellSpaces
	spellReverseKeys
	spellLeadingZeros
	spellBlockObject
	spellBlockZeros
	spellUpperData
	spellEscape
	spellLongSlot
	spellPinnedTag
)

// refusedSpellings are spellings geth refuses (-32602): leading zeros of
// a quantity, escaped hex. They must never share the key of their valid
// twins, whose answers they would be served.
const refusedSpellings = spellLeadingZeros | spellBlockZeros | spellEscape

func (c fuzzCall) spell(bits uint16) (evm.Call, bool) {
	on := func(b uint16) bool { return bits&b != 0 }
	sp := ""
	if on(spellSpaces) {
		sp = " \n\t"
	}
	hexs := func(b []byte, upper bool) string {
		s := hex.EncodeToString(b)
		if upper {
			s = strings.ToUpper(s)
		}
		return s
	}
	prefix := "0x"
	if on(spellUpperPrefix) {
		prefix = "0X"
	}
	addr := `"` + prefix + hexs(c.addr[:], on(spellUpperAddr)) + `"`
	if on(spellEscape) {
		addr = `"\u0030x` + hexs(c.addr[:], on(spellUpperAddr)) + `"`
	}
	qty := func(n uint64) string {
		s := fmt.Sprintf("%x", n)
		if on(spellLeadingZeros) {
			s = "00" + s
		}
		return `"0x` + s + `"`
	}
	block := qty(c.block)
	if !on(spellBlockZeros) {
		block = `"` + evm.Quantity(c.block) + `"`
	}
	pinned := on(spellPinnedTag)
	if pinned {
		block = `"latest"`
	}
	if on(spellBlockObject) && !pinned {
		block = `{` + sp + `"blockNumber":` + sp + block + `}`
	}
	var args []string
	switch c.method {
	case "eth_call":
		members := []string{`"to":` + addr, `"data":"0x` + hexs(c.data, on(spellUpperData)) + `"`, `"value":` + qty(c.value)}
		if c.from {
			members = append(members, `"from":"0x00000000000000000000000000000000000000f1"`)
		}
		if on(spellReverseKeys) {
			for i, j := 0, len(members)-1; i < j; i, j = i+1, j-1 {
				members[i], members[j] = members[j], members[i]
			}
		}
		args = []string{"{" + sp + strings.Join(members, ","+sp) + "}", block}
		if c.state {
			args = append(args, `{"0x00000000000000000000000000000000000000f2":{"balance":"0x1"}}`)
		}
	case "eth_getStorageAt":
		s := fmt.Sprintf("0x%x", c.slot)
		if on(spellLongSlot) {
			s = fmt.Sprintf("0x%064x", c.slot)
		}
		args = []string{addr, `"` + s + `"`, block}
	default:
		args = []string{addr, block}
	}
	call := evm.ParseCall(c.method, []byte("["+sp+strings.Join(args, ","+sp)+sp+"]"))
	if pinned {
		// As the router pins a tag to the cluster's number.
		return call.WithBlock(c.block)
	}
	return call, true
}

var fuzzMethods = []string{"eth_call", "eth_getBalance", "eth_getCode", "eth_getStorageAt"}

// FuzzKey: two spellings of one call share a key; a spelling geth refuses
// never shares its valid twin's; a call that differs in meaning (its data,
// value, sender, block, address, slot, state override or method) never
// shares one.
func FuzzKey(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2}, []byte{0xab}, uint64(5), uint64(10), uint64(1), uint16(0), uint16(0x7ff), uint8(0))
	f.Add(uint8(3), []byte{0xff}, []byte{}, uint64(0), uint64(160), uint64(0), uint16(0x155), uint16(0x2aa), uint8(5))
	f.Add(uint8(1), []byte{}, []byte{0}, uint64(1), uint64(200), uint64(7), uint16(1), uint16(2), uint8(3))
	f.Fuzz(func(t *testing.T, method uint8, addr, data []byte, value, block, slot uint64, a, b uint16, mutate uint8) {
		c := fuzzCall{method: fuzzMethods[int(method)%len(fuzzMethods)], data: data, value: value,
			block: block % (fuzzHead + 20), slot: slot}
		copy(c.addr[:], addr)
		a, b = a&^refusedSpellings, b&^refusedSpellings
		ka, okA := fuzzKey(t, c, a)
		kb, okB := fuzzKey(t, c, b)
		if okA != okB || ka != kb {
			t.Fatalf("%+v: spellings %#x and %#x: keys %v %v, ok %v %v", c, a, b, ka, kb, okA, okB)
		}
		if r := uint16(mutate) << 4 & refusedSpellings; r != 0 && okA {
			valid, _ := c.spell(a)
			bad, _ := c.spell(a | r)
			if kr, okR := fuzzKey(t, c, a|r); okR && kr == ka && string(bad.Params) != string(valid.Params) {
				t.Fatalf("%+v: refused spelling %s shares the key of %s", c, bad.Params, valid.Params)
			}
		}
		m, ok := mutated(c, mutate)
		if !ok || !okA {
			return
		}
		if km, okM := fuzzKey(t, m, b); okM && km == ka {
			t.Fatalf("%+v and %+v differ in meaning and share key %v", c, m, ka)
		}
	})
}

func fuzzKey(t *testing.T, c fuzzCall, bits uint16) (Key, bool) {
	call, ok := c.spell(bits)
	if !ok {
		t.Fatalf("%+v %#x: no call", c, bits)
	}
	k, _, ok := deriveKey("dev", &call, fuzzView{})
	return k, ok
}

// mutated is c changed in one part of its meaning; ok is false when that
// part is not c's method's.
func mutated(c fuzzCall, how uint8) (fuzzCall, bool) {
	isCall := c.method == "eth_call"
	switch how % 8 {
	case 0:
		c.data = append(append([]byte(nil), c.data...), 0)
		return c, isCall
	case 1:
		c.value++
		return c, isCall
	case 2:
		c.from = !c.from
		return c, isCall
	case 3:
		c.block++
		return c, true
	case 4:
		c.addr[19] ^= 1
		return c, true
	case 5:
		c.slot++
		return c, c.method == "eth_getStorageAt"
	case 6:
		c.state = !c.state
		return c, isCall
	}
	switch c.method {
	case "eth_getBalance":
		c.method = "eth_getCode"
	case "eth_getCode":
		c.method = "eth_getBalance"
	default:
		return c, false
	}
	return c, true
}
