package fakenode

import (
	"encoding/binary"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Hash domains keep block hashes, transaction hashes and the fields derived
// from them apart even for equal (number, salt) inputs.
const (
	domainBlock = 0x626c6f636b000000 // "block"
	domainTx    = 0x7478000000000000 // "tx"
)

// Shape of the synthetic chain.
const (
	txsPerBlock      = 2
	gasLimit         = 30_000_000
	txGasLimit       = 100_000
	tipWei           = 1_000_000 // maxPriorityFeePerGas of every transaction
	baseFeeWei       = 1_000_000_000
	transferSelector = "a9059cbb" // transfer(address,uint256)
)

// fork gives every block numbered from onward the salt salt.
type fork struct {
	from uint64
	salt uint64
}

// chainView is one immutable state of the chain. Changes publish a new view
// through Node.view, so readers take one atomic load and see a consistent
// head, lag and fork list.
type chainView struct {
	head  uint64
	lag   uint64
	forks []fork // ascending by from; never mutated once published
	chain uint64 // SwitchChain: the chain id whose chain is served; 0: the node's own
}

// visible is the head the node admits to: Head()-lag.
func (v *chainView) visible() uint64 {
	if v.lag >= v.head {
		return 0
	}
	return v.head - v.lag
}

func (v *chainView) saltAt(num uint64) uint64 {
	var s uint64
	for _, f := range v.forks {
		if f.from > num {
			break
		}
		s = f.salt
	}
	return s
}

// salts lists every salt a visible block may carry, for lookups by hash.
func (v *chainView) salts(dst []uint64) []uint64 {
	dst = append(dst, 0)
	for _, f := range v.forks {
		dst = append(dst, f.salt)
	}
	return dst
}

// below returns the visible head minus depth, floored at genesis: the safe
// and finalized blocks.
func (v *chainView) below(depth uint64) uint64 {
	vis := v.visible()
	if depth >= vis {
		return 0
	}
	return vis - depth
}

func (v *chainView) withFork(from, salt uint64) *chainView {
	nv := &chainView{head: v.head, lag: v.lag, chain: v.chain}
	for _, f := range v.forks {
		if f.from < from {
			nv.forks = append(nv.forks, f)
		}
	}
	nv.forks = append(nv.forks, fork{from: from, salt: salt})
	return nv
}

// divergence returns the lowest block number whose salt differs between the
// two views, and false if none does. Salts are piecewise constant with
// breaks at the fork points, so only those need checking.
func divergence(a, b *chainView) (uint64, bool) {
	if a.chain != b.chain {
		return 1, true // another chain from genesis on (genesis is never notified)
	}
	var (
		best  uint64
		found bool
	)
	check := func(n uint64) {
		if (!found || n < best) && a.saltAt(n) != b.saltAt(n) {
			best, found = n, true
		}
	}
	for _, f := range a.forks {
		check(f.from)
	}
	for _, f := range b.forks {
		check(f.from)
	}
	return best, found
}

// mix64 is an invertible 64-bit mixer (the splitmix64 finaliser). Hashes
// carry mix64(n ^ key) in their last 8 bytes so that a lookup by hash
// recovers n without an index and then verifies the whole hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func unmix64(x uint64) uint64 {
	x = unxorshift(x, 31)
	x *= inverse64(0x94d049bb133111eb)
	x = unxorshift(x, 27)
	x *= inverse64(0xbf58476d1ce4e5b9)
	x = unxorshift(x, 30)
	return x
}

func unxorshift(y uint64, s uint) uint64 {
	x := y
	for sh := s; sh < 64; sh += s {
		x ^= y >> sh
	}
	return x
}

// inverse64 is the multiplicative inverse of odd m modulo 2^64 (Newton's
// iteration; each step doubles the correct low bits, from 3).
func inverse64(m uint64) uint64 {
	inv := m
	for range 5 {
		inv *= 2 - m*inv
	}
	return inv
}

// hasher derives every synthetic hash of one chain.
type hasher struct {
	seed uint64 // the chain id the node was built with
}

func (h hasher) key(domain, salt uint64) uint64 {
	return mix64(salt ^ domain ^ mix64(h.seed))
}

func (h hasher) make(domain, salt, x uint64) common.Hash {
	var in [24]byte
	binary.BigEndian.PutUint64(in[0:], h.seed^domain)
	binary.BigEndian.PutUint64(in[8:], salt)
	binary.BigEndian.PutUint64(in[16:], x)
	out := crypto.Keccak256Hash(in[:])
	binary.BigEndian.PutUint64(out[24:], mix64(x^h.key(domain, salt)))
	return out
}

// recover returns the x a hash of (domain, salt) would carry.
func (h hasher) recover(domain, salt uint64, hash common.Hash) uint64 {
	return unmix64(binary.BigEndian.Uint64(hash[24:])) ^ h.key(domain, salt)
}

func (h hasher) block(num, salt uint64) common.Hash {
	return h.make(domainBlock, salt, num)
}

// tx hashes encode 2*num+idx: blocks hold txsPerBlock (2) transactions.
func (h hasher) tx(num uint64, idx int, salt uint64) common.Hash {
	return h.make(domainTx, salt, num*txsPerBlock+uint64(idx))
}

// findBlock returns the number of the visible block with that hash.
func (h hasher) findBlock(v *chainView, hash common.Hash) (uint64, bool) {
	var buf [8]uint64
	vis := v.visible()
	for _, salt := range v.salts(buf[:0]) {
		num := h.recover(domainBlock, salt, hash)
		if num <= vis && v.saltAt(num) == salt && h.block(num, salt) == hash {
			return num, true
		}
	}
	return 0, false
}

// findTx returns the block and index of the visible transaction with that
// hash.
func (h hasher) findTx(v *chainView, hash common.Hash) (uint64, int, bool) {
	var buf [8]uint64
	vis := v.visible()
	for _, salt := range v.salts(buf[:0]) {
		g := h.recover(domainTx, salt, hash)
		num, idx := g/txsPerBlock, int(g%txsPerBlock)
		if num >= 1 && num <= vis && v.saltAt(num) == salt && h.tx(num, idx, salt) == hash {
			return num, idx, true
		}
	}
	return 0, 0, false
}

// derive spreads a hash into another hash-looking value cheaply, for roots
// and signatures that only need to look random and stay deterministic.
func derive(h common.Hash, domain uint64) common.Hash {
	var out common.Hash
	acc := domain
	for i := 0; i < 4; i++ {
		acc = mix64(acc ^ binary.BigEndian.Uint64(h[i*8:]))
		binary.BigEndian.PutUint64(out[i*8:], acc)
	}
	return out
}
