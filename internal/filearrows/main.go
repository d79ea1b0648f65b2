// Command filearrows draws the arrows between the files of each package
// and finds the ones that run in circles. An arrow from file A to file B
// means a declaration in A uses something declared in B: a type (or its
// fields and interface methods), func, method, var or const. Test files
// are left out. For each cycle it names the arrows that close it (the ones
// running back up when the files are laid out so that fewest do) and the
// moves of one declaration, or of one whole file, that would take files out
// of it.
//
//	go run ./internal/filearrows [-v] [-moves N] [-summary] [packages]
//
// It reads code and changes nothing. See docs/file-arrows.md.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "filearrows:", err)
		os.Exit(1)
	}
}

type options struct {
	verbose bool // every arrow, not only the ones in cycles
	summary bool // one line a package
	moves   int  // moves shown a cycle
	plan    bool // moves one after another, each made before the next is sought
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("filearrows", flag.ContinueOnError)
	var o options
	fs.BoolVar(&o.verbose, "v", false, "list every arrow of every package")
	fs.BoolVar(&o.summary, "summary", false, "one line a package: files, arrows, cycles")
	fs.BoolVar(&o.plan, "plan", false, "after each package's cycles, the declaration moves that, made one after another, take most out of them")
	fs.IntVar(&o.moves, "moves", 5, "moves to show for each cycle")
	if err := fs.Parse(args); err != nil {
		return err
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	pkgs, err := load(patterns)
	if err != nil {
		return err
	}
	for _, p := range pkgs {
		report(w, build(p), o)
	}
	return nil
}

func load(patterns []string) ([]*packages.Package, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("load: %s", strings.Join(errs, "; "))
	}
	return pkgs, nil
}

func report(w io.Writer, g *graph, o options) {
	home := g.home()
	m := g.arrows(home, len(g.files))
	arrows := 0
	for a := range m {
		for b := range m[a] {
			if m[a][b] > 0 {
				arrows++
			}
		}
	}
	cycles := components(m)
	t := weigh(m)
	fmt.Fprintf(w, "%s: %d files, %d arrows, %d cycles (%d files, %d arrows in them)\n",
		g.pkg, len(g.files), arrows, t.cycles, t.files, t.arrows)
	if o.summary {
		return
	}
	if o.verbose {
		for a := range m {
			for b := range m[a] {
				if m[a][b] > 0 {
					fmt.Fprintf(w, "  %s -> %s: %s\n", g.files[a], g.files[b], strings.Join(g.carriers(home, a, b), ", "))
				}
			}
		}
	}
	for i, c := range cycles {
		ordered := order(m, c)
		var names []string
		for _, f := range ordered {
			names = append(names, g.files[f])
		}
		fmt.Fprintf(w, "  cycle %d, top to bottom: %s\n", i+1, strings.Join(names, " "))
		for _, ab := range backArrows(m, ordered) {
			fmt.Fprintf(w, "    back up: %s -> %s: %s\n", g.files[ab[0]], g.files[ab[1]], strings.Join(g.carriers(home, ab[0], ab[1]), ", "))
		}
		mv := moves(g, home, c)
		if len(mv) == 0 {
			fmt.Fprintf(w, "    no move of one declaration or one file takes a file or an arrow out of it\n")
		}
		for j, x := range mv {
			if j == o.moves {
				fmt.Fprintf(w, "    … %d more moves\n", len(mv)-j)
				break
			}
			leaf := ""
			if x.leaf {
				leaf = " (it uses nothing else in the package: it could leave it)"
			}
			fmt.Fprintf(w, "    move %s from %s to %s: files in cycles %d -> %d, arrows %d -> %d%s\n",
				x.what, x.from, x.to, x.before.files, x.after.files, x.before.arrows, x.after.arrows, leaf)
		}
	}
	if o.plan && len(cycles) > 0 {
		for _, x := range plan(g) {
			fmt.Fprintf(w, "  plan: move %s from %s to %s: cycles %d, files in them %d, arrows %d\n",
				x.what, x.from, x.to, x.after.cycles, x.after.files, x.after.arrows)
		}
	}
}
