package main

import (
	"strings"
	"testing"
)

// TestCyclicPackage: the test bed has one cycle, store.go <-> double.go,
// closed by double.go's use of clamp, and moving clamp to double.go ends it.
func TestCyclicPackage(t *testing.T) {
	pkgs, err := load([]string{"./testdata/cyclic"})
	if err != nil {
		t.Fatal(err)
	}
	g := build(pkgs[0])
	if got, want := strings.Join(g.files, " "), "double.go report.go store.go"; got != want {
		t.Fatalf("files %q, want %q", got, want)
	}
	m := g.arrows(g.home(), len(g.files))
	tests := []struct {
		give [2]string
		want []string
	}{
		{[2]string{"store.go", "double.go"}, []string{"double"}},
		{[2]string{"double.go", "store.go"}, []string{"clamp"}},
		{[2]string{"report.go", "store.go"}, []string{"Store"}}, // its field n counts as Store
		{[2]string{"store.go", "store.go"}, nil},
		{[2]string{"store.go", "report.go"}, nil},
	}
	index := map[string]int{}
	for i, f := range g.files {
		index[f] = i
	}
	for _, tt := range tests {
		a, b := index[tt.give[0]], index[tt.give[1]]
		got := g.carriers(g.home(), a, b)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") || (m[a][b] > 0) != (len(tt.want) > 0) {
			t.Errorf("%s -> %s carries %v (count %d), want %v", tt.give[0], tt.give[1], got, m[a][b], tt.want)
		}
	}

	if got := weigh(m); got != (tally{cycles: 1, files: 2, arrows: 2}) {
		t.Fatalf("weigh = %+v, want one cycle of 2 files and 2 arrows", got)
	}
	c := components(m)[0]
	if back := backArrows(m, order(m, c)); len(back) != 1 {
		t.Errorf("back arrows %v, want one", back)
	}
	mv := moves(g, g.home(), c)
	if len(mv) == 0 || mv[0].after != (tally{}) {
		t.Fatalf("best move %+v, want one that ends the cycle", mv)
	}
	p := plan(g)
	if len(p) != 1 || p[0].after != (tally{}) {
		t.Fatalf("plan %+v, want one move that ends the cycle", p)
	}
}

// TestRunReports: the command's text names the cycle and a move that ends it.
func TestRunReports(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-plan", "./testdata/cyclic"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"3 files, 3 arrows, 1 cycles (2 files, 2 arrows in them)",
		"back up: ",
		"files in cycles 2 -> 0",
		"plan: move ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
