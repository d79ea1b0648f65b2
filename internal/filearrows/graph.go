package main

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// graph is one package's files and the top-level declarations in them. A
// declaration is the unit a move carries: a func or method, one spec of a
// type or var group, or a whole const group (iota and implied values make
// its specs one piece).
type graph struct {
	pkg   string
	files []string // base names, sorted
	units []unit
}

type unit struct {
	name string
	file int
	uses map[int]int // unit -> references from this unit to it
}

// span is where a unit's source lies, to find the unit an object was
// declared in.
type span struct {
	pos, end token.Pos
	unit     int
}

// build reads one loaded package (non-test files) into a graph. An arrow
// from file A to file B exists when a declaration in A refers to anything
// declared inside a top-level declaration of B: the type, func, method, var
// or const itself, or a field or interface method of a type declared there.
func build(p *packages.Package) *graph {
	g := &graph{pkg: p.PkgPath}
	order := make([]int, len(p.Syntax))
	for i := range order {
		order[i] = i
	}
	name := func(i int) string { return filepath.Base(p.Fset.Position(p.Syntax[i].Pos()).Filename) }
	sort.Slice(order, func(a, b int) bool { return name(order[a]) < name(order[b]) })

	var spans []span
	var nodes []ast.Node // unit -> its syntax
	add := func(file int, n ast.Node, label string) {
		spans = append(spans, span{n.Pos(), n.End(), len(g.units)})
		nodes = append(nodes, n)
		g.units = append(g.units, unit{name: label, file: file, uses: map[int]int{}})
	}
	for fi, si := range order {
		g.files = append(g.files, name(si))
		for _, d := range p.Syntax[si].Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				add(fi, d, funcName(d))
			case *ast.GenDecl:
				if d.Tok == token.IMPORT {
					continue
				}
				if d.Tok == token.CONST && len(d.Specs) > 1 {
					add(fi, d, "const "+specName(d.Specs[0])+"…")
					continue
				}
				for _, s := range d.Specs {
					if len(d.Specs) == 1 {
						add(fi, d, specName(s)) // the doc comment goes with it
					} else {
						add(fi, s, specName(s))
					}
				}
			}
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].pos < spans[b].pos })
	unitAt := func(pos token.Pos) int {
		i := sort.Search(len(spans), func(i int) bool { return spans[i].end > pos })
		if i < len(spans) && spans[i].pos <= pos {
			return spans[i].unit
		}
		return -1
	}

	for u, n := range nodes {
		ast.Inspect(n, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := p.TypesInfo.Uses[id]
			if obj == nil || obj.Pkg() != p.Types {
				return true
			}
			if v := unitAt(obj.Pos()); v >= 0 && v != u {
				g.units[u].uses[v]++
			}
			return true
		})
	}
	return g
}

func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + d.Name.Name
		}
		return d.Name.Name
	}
}

func specName(s ast.Spec) string {
	switch s := s.(type) {
	case *ast.TypeSpec:
		return s.Name.Name
	case *ast.ValueSpec:
		var names []string
		for _, n := range s.Names {
			names = append(names, n.Name)
		}
		return strings.Join(names, ", ")
	}
	return "?"
}

// arrows counts, for each ordered pair of files, the distinct declarations
// of the second that the first refers to; fileOf says where each unit is
// (a move changes it). n is the number of files, which a move to a new file
// makes one more than len(g.files).
func (g *graph) arrows(fileOf []int, n int) [][]int {
	used := make([]map[int]bool, n*n)
	for u, un := range g.units {
		for v := range un.uses {
			a, b := fileOf[u], fileOf[v]
			if a == b {
				continue
			}
			if used[a*n+b] == nil {
				used[a*n+b] = map[int]bool{}
			}
			used[a*n+b][v] = true
		}
	}
	m := make([][]int, n)
	for a := range m {
		m[a] = make([]int, n)
		for b := range m[a] {
			m[a][b] = len(used[a*n+b])
		}
	}
	return m
}

// carriers names the declarations of file b that file a refers to.
func (g *graph) carriers(fileOf []int, a, b int) []string {
	if a == b {
		return nil
	}
	seen := map[int]bool{}
	for u, un := range g.units {
		if fileOf[u] != a {
			continue
		}
		for v := range un.uses {
			if fileOf[v] == b {
				seen[v] = true
			}
		}
	}
	var names []string
	for v := range seen {
		names = append(names, g.units[v].name)
	}
	sort.Strings(names)
	return names
}

func (g *graph) home() []int {
	fileOf := make([]int, len(g.units))
	for u, un := range g.units {
		fileOf[u] = un.file
	}
	return fileOf
}
