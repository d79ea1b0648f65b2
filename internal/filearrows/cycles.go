package main

import (
	"sort"
	"strings"
)

// components returns the strongly connected components of the arrow
// matrix that hold more than one file: the cycles. Each is sorted by file
// index, and the list by its first file.
func components(m [][]int) [][]int {
	n := len(m)
	index := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) { // Tarjan
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		for w := 0; w < n; w++ {
			if m[v][w] == 0 || w == v {
				continue
			}
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			on[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			sort.Ints(c)
			out = append(out, c)
		}
	}
	for v := 0; v < n; v++ {
		if index[v] < 0 {
			visit(v)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

// tally is what a package's cycles weigh: files caught in a cycle and
// arrows between two files of the same cycle.
type tally struct {
	cycles, files, arrows int
}

func weigh(m [][]int) tally {
	var t tally
	for _, c := range components(m) {
		t.cycles++
		t.files += len(c)
		for _, a := range c {
			for _, b := range c {
				if a != b && m[a][b] > 0 {
					t.arrows++
				}
			}
		}
	}
	return t
}

func (t tally) less(o tally) bool {
	if t.files != o.files {
		return t.files < o.files
	}
	return t.arrows < o.arrows
}

// order lays a cycle's files out so that as few arrows as it can manage run
// back up, from a file to one above it (Eades, Lin and Smyth's greedy
// heuristic, arrows weighed by the declarations they carry): files that
// only use sink to the bottom, files only used rise to the top, and of the
// rest the one that uses most and is used least goes up first.
func order(m [][]int, files []int) []int {
	left := map[int]bool{}
	for _, f := range files {
		left[f] = true
	}
	deg := func(f int, out bool) int {
		d := 0
		for g := range left {
			if g == f {
				continue
			}
			if out {
				d += m[f][g]
			} else {
				d += m[g][f]
			}
		}
		return d
	}
	sorted := func() []int {
		var s []int
		for f := range left {
			s = append(s, f)
		}
		sort.Ints(s)
		return s
	}
	var top, bottom []int
	for len(left) > 0 {
		changed := true
		for changed {
			changed = false
			for _, f := range sorted() {
				if deg(f, true) == 0 {
					bottom = append([]int{f}, bottom...)
					delete(left, f)
					changed = true
				} else if deg(f, false) == 0 {
					top = append(top, f)
					delete(left, f)
					changed = true
				}
			}
		}
		if len(left) == 0 {
			break
		}
		best, bestD := -1, 0
		for _, f := range sorted() {
			if d := deg(f, true) - deg(f, false); best < 0 || d > bestD {
				best, bestD = f, d
			}
		}
		top = append(top, best)
		delete(left, best)
	}
	return append(top, bottom...)
}

// backArrows are the arrows of a cycle that run from a file to one above
// it in order: the arrows that close the cycle.
func backArrows(m [][]int, ordered []int) [][2]int {
	rank := map[int]int{}
	for i, f := range ordered {
		rank[f] = i
	}
	var out [][2]int
	for _, a := range ordered {
		for _, b := range ordered {
			if m[a][b] > 0 && rank[b] < rank[a] {
				out = append(out, [2]int{a, b})
			}
		}
	}
	return out
}

// move is one declaration, or all of one file, put in another file.
type move struct {
	units  []int  // the declarations moved, for a plan
	target int    // their new file
	what   string // a declaration's name, or "file x.go"
	from   string
	to     string // a file, or "a new file"
	leaf   bool   // the declaration uses nothing else in the package: it could leave it
	merge  bool   // a whole file, merged into another
	before tally
	after  tally
}

// piece is what one move carries: one declaration, or a type with the
// methods declared beside it.
type piece struct {
	name  string
	units []int
}

func pieces(g *graph, home []int) []piece {
	var out []piece
	methods := map[string][]int{} // "file\x00Type" -> its methods there
	for u, un := range g.units {
		out = append(out, piece{un.name, []int{u}})
		if recv, _, ok := strings.Cut(un.name, "."); ok {
			k := g.files[home[u]] + "\x00" + recv
			methods[k] = append(methods[k], u)
		}
	}
	for u, un := range g.units {
		if ms := methods[g.files[home[u]]+"\x00"+un.name]; len(ms) > 0 {
			out = append(out, piece{un.name + " with its methods", append([]int{u}, ms...)})
		}
	}
	return out
}

// moves tries every declaration of the cycle (and every type with its
// methods) that carries one of its
// arrows in every file it touches and in a new file of its own, and every
// file of the cycle merged into every other, and keeps the moves that take
// files out of cycles (or, with as many files, arrows), best first and
// declarations before files: merging two files always ends the cycle
// between them, and is the move of last resort.
func moves(g *graph, home []int, cycle []int) []move {
	n := len(g.files)
	before := weigh(g.arrows(home, n))
	in := map[int]bool{}
	for _, f := range cycle {
		in[f] = true
	}
	usedBy := make([][]int, len(g.units))
	for u, un := range g.units {
		for v := range un.uses {
			usedBy[v] = append(usedBy[v], u)
		}
	}
	try := func(fileOf []int) tally { return weigh(g.arrows(fileOf, n+1)) }

	var out []move
	for _, pc := range pieces(g, home) {
		from := home[pc.units[0]]
		if !in[from] {
			continue
		}
		mine := map[int]bool{}
		for _, u := range pc.units {
			mine[u] = true
		}
		targets := map[int]bool{}
		leaf := true
		for _, u := range pc.units {
			for v := range g.units[u].uses {
				if !mine[v] {
					targets[home[v]] = true
					leaf = false
				}
			}
			for _, w := range usedBy[u] {
				if !mine[w] {
					targets[home[w]] = true
				}
			}
		}
		carries := false
		for t := range targets {
			carries = carries || (in[t] && t != from)
		}
		if !carries {
			continue
		}
		targets[n] = true // a new file
		delete(targets, from)
		for t := range targets {
			fileOf := append([]int(nil), home...)
			for _, u := range pc.units {
				fileOf[u] = t
			}
			if after := try(fileOf); after.less(before) {
				out = append(out, move{units: pc.units, target: t, what: pc.name, from: g.files[from], to: g.name(t), leaf: leaf, before: before, after: after})
			}
		}
	}
	for _, a := range cycle {
		for _, b := range cycle {
			if a == b {
				continue
			}
			fileOf := append([]int(nil), home...)
			for u := range fileOf {
				if fileOf[u] == a {
					fileOf[u] = b
				}
			}
			if after := try(fileOf); after.less(before) {
				out = append(out, move{what: "all of " + g.files[a], from: g.files[a], to: g.files[b], merge: true, before: before, after: after})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].merge != out[j].merge {
			return !out[i].merge
		}
		if out[i].after != out[j].after {
			return out[i].after.less(out[j].after)
		}
		if out[i].what != out[j].what {
			return out[i].what < out[j].what
		}
		return out[i].to < out[j].to
	})
	return out
}

func (g *graph) name(f int) string {
	if f == len(g.files) {
		return "a new file"
	}
	return g.files[f]
}

// plan moves declarations, best move first, while a move still takes files
// or arrows out of cycles, into files that exist. It returns the moves in
// the order made.
func plan(g *graph) []move {
	home := g.home()
	var out []move
	for {
		var best *move
		for _, c := range components(g.arrows(home, len(g.files))) {
			for _, m := range moves(g, home, c) {
				if m.merge || m.target == len(g.files) {
					continue
				}
				if best == nil || m.after.less(best.after) {
					best = &m
				}
				break // moves are sorted: the first that qualifies is its cycle's best
			}
		}
		if best == nil {
			return out
		}
		for _, u := range best.units {
			home[u] = best.target
		}
		out = append(out, *best)
	}
}
