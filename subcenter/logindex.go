package subcenter

import (
	"maps"

	"github.com/venn-gateway/venn/evm"
)

// logIndex finds the logs subscriptions a log matches: by address for
// filters that name addresses, and every filter that names none.
type logIndex struct {
	byAddr map[string]subSet
	any    map[*sub]struct{}
	n      int
	// peak is the most addresses byAddr held since it was last made: a Go
	// map never gives back its table, so one that emptied out is made
	// again, or a client that subscribed 100,000 addresses and left would
	// keep megabytes held.
	peak int
}

// indexShrinkMin is the smallest table worth making again when it empties.
const indexShrinkMin = 1024

// subSet is the subscriptions that name one address. Most addresses are
// named by one subscription, which needs no map of its own: a filter of
// many addresses costs an index entry per address, not a map per address.
type subSet struct {
	one  *sub
	many map[*sub]struct{}
}

func newLogIndex() logIndex {
	return logIndex{byAddr: map[string]subSet{}, any: map[*sub]struct{}{}}
}

func (x *logIndex) add(s *sub) {
	x.n++
	if len(s.filter.addrs) == 0 {
		x.any[s] = struct{}{}
		return
	}
	for _, a := range s.filter.addrs {
		set := x.byAddr[a]
		switch {
		case set.one == s:
		case set.one == nil && set.many == nil:
			set.one = s
		case set.many == nil:
			set.many = map[*sub]struct{}{set.one: {}, s: {}}
			set.one = nil
		default:
			set.many[s] = struct{}{}
		}
		x.byAddr[a] = set
	}
	x.peak = max(x.peak, len(x.byAddr))
}

func (x *logIndex) remove(s *sub) {
	x.n--
	if len(s.filter.addrs) == 0 {
		delete(x.any, s)
		return
	}
	for _, a := range s.filter.addrs {
		set, ok := x.byAddr[a]
		switch {
		case !ok:
		case set.one == s:
			delete(x.byAddr, a)
		case set.many != nil:
			delete(set.many, s)
			if len(set.many) == 0 {
				delete(x.byAddr, a)
			}
		}
	}
	if x.peak >= indexShrinkMin && len(x.byAddr) <= x.peak/4 {
		m := make(map[string]subSet, len(x.byAddr))
		maps.Copy(m, x.byAddr)
		x.byAddr, x.peak = m, len(m)
	}
}

// match calls fn for each subscription that l, of block n, matches, once.
func (x *logIndex) match(l *evm.Log, n uint64, fn func(*sub)) {
	if set, ok := x.byAddr[l.Address]; ok {
		if set.one != nil && set.one.filter.matches(l, n) {
			fn(set.one)
		}
		for s := range set.many {
			if s.filter.matches(l, n) {
				fn(s)
			}
		}
	}
	for s := range x.any {
		if s.filter.matches(l, n) {
			fn(s)
		}
	}
}
