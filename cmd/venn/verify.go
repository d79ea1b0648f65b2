package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/migrations"
)

// Verify bounds.
const (
	// verifyPage is how many stored blocks one step reads, checks and (with
	// --purge) purges in one transaction.
	verifyPage = 1000
	// maxListedRanges bounds the ranges a summary lists one by one.
	maxListedRanges = 50
)

const historyUsage = `usage: venn history verify --config FILE --chain NAME --from A --to B [--purge] [--concurrency N]
       venn history stats --config FILE
`

// history runs a history subcommand.
func history(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, historyUsage)
		return exitUsage
	}
	switch args[0] {
	case "verify":
		return verify(args[1:], stdout, stderr)
	case "stats":
		return historyStats(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, historyUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "venn history: unknown command %q\n%s", args[0], historyUsage)
	return exitUsage
}

// verify checks a chain's stored blocks from..to against its remotes and,
// with --purge, removes those of another chain.
func verify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("history verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rf := newRangeFlags(fs, "last block number (required)", "blocks asked of the remotes at once")
	purge := fs.Bool("purge", false, "remove the stored blocks of another chain, with their transactions and logs")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, cc, code := rf.load(stderr)
	if cfg == nil {
		return code
	}
	from, to, conc := rf.from, rf.to, rf.conc
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := runVerify(ctx, cfg, cc, verifyArgs{from: *from, to: *to, purge: *purge, conc: *conc}, stderr)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "venn history verify: interrupted; what was purged stays purged")
		} else {
			fmt.Fprintf(stderr, "venn history verify: %v\n", err)
		}
		return exitError
	}
	sum.print(stdout, cc.Name)
	if !sum.clean() {
		return exitError
	}
	return exitOK
}

type verifyArgs struct {
	from, to uint64
	purge    bool
	conc     int
}

// verifySummary is what a verify found and did.
type verifySummary struct {
	from, to                   uint64
	stored, canonical          uint64
	foreign, broken, unchecked []blockstore.Range // by block number, ascending
	nForeign, nUnchecked       uint64
	purged                     blockstore.Purged
	purging                    bool
	took                       time.Duration
}

// clean reports whether the range holds nothing but blocks of the chain
// the remotes follow, each linked to the stored block below it: so it was,
// or the purge made it so (a broken link next to a purged block is gone
// with it).
func (s *verifySummary) clean() bool {
	if s.nUnchecked > 0 {
		return false
	}
	if s.nForeign == 0 {
		return len(s.broken) == 0
	}
	return s.purging && uint64(s.purged.Blocks) == s.nForeign && s.brokenByForeign()
}

// brokenByForeign reports whether every broken link touches a foreign
// block (purged with it).
func (s *verifySummary) brokenByForeign() bool {
	for _, b := range s.broken {
		for n := b.From; n <= b.To; n++ {
			if !inRanges(s.foreign, n) && !inRanges(s.foreign, n-1) {
				return false
			}
		}
	}
	return true
}

func inRanges(rs []blockstore.Range, n uint64) bool {
	for _, r := range rs {
		if r.From <= n && n <= r.To {
			return true
		}
	}
	return false
}

func (s *verifySummary) print(w io.Writer, chain string) {
	fmt.Fprintf(w, "verified %s %d..%d: %d stored blocks, %d of the remotes' chain, %d foreign, %d unchecked, %d broken links, in %s\n",
		chain, s.from, s.to, s.stored, s.canonical, s.nForeign, s.nUnchecked, countIn(s.broken), s.took.Round(time.Millisecond))
	if len(s.foreign) > 0 {
		fmt.Fprintf(w, "foreign (another chain's hash at the number): %s\n", listRanges(s.foreign))
	}
	if len(s.broken) > 0 {
		fmt.Fprintf(w, "broken links (the block's parent is not the stored block below it): %s\n", listRanges(s.broken))
	}
	if len(s.unchecked) > 0 {
		fmt.Fprintf(w, "unchecked (no remote answered for the block): %s\n", listRanges(s.unchecked))
	}
	switch {
	case s.purging && s.purged.Blocks > 0:
		fmt.Fprintf(w, "purged %d foreign blocks (%d transactions, %d logs); no longer covered: %s\n",
			s.purged.Blocks, s.purged.Transactions, s.purged.Logs, listRanges(s.purged.Uncovered))
	case s.nForeign > 0:
		fmt.Fprintln(w, "run again with --purge to remove the foreign blocks; venn backfill stores the right ones")
	}
}

func countIn(rs []blockstore.Range) uint64 {
	var n uint64
	for _, r := range rs {
		n += r.To - r.From + 1
	}
	return n
}

func listRanges(rs []blockstore.Range) string {
	var b strings.Builder
	for i, r := range rs {
		if i == maxListedRanges {
			fmt.Fprintf(&b, " and %d more ranges", len(rs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if r.From == r.To {
			fmt.Fprintf(&b, "%d", r.From)
		} else {
			fmt.Fprintf(&b, "%d..%d", r.From, r.To)
		}
	}
	return b.String()
}

// addRange adds n to ascending ranges, merging it with the last.
func addRange(rs []blockstore.Range, n uint64) []blockstore.Range {
	if k := len(rs); k > 0 && rs[k-1].To+1 == n {
		rs[k-1].To = n
		return rs
	}
	return append(rs, blockstore.Range{From: n, To: n})
}

// verifyStore is what verify needs of the chain's history store.
type verifyStore interface {
	Refs(ctx context.Context, from, to uint64, limit int) ([]blockstore.StoredRef, error)
	Purge(ctx context.Context, blocks []blockstore.StoredRef) (blockstore.Purged, error)
}

// runVerify sets up the chain's remotes pool and history store as backfill
// does, and verifies.
func runVerify(ctx context.Context, cfg *app.Config, cc app.ChainConfig, a verifyArgs, stderr io.Writer) (sum verifySummary, err error) {
	log := cliLogger(cfg, stderr)
	if _, err := migrations.Up(ctx, cfg.Postgres.URL, log); err != nil {
		return sum, fmt.Errorf("migrations: %w", err)
	}
	pg, err := cfg.Postgres.Open(ctx, blockstore.Options{Logger: log})
	if err != nil {
		return sum, errors.New("postgres.url: cannot be used (check its host and options)")
	}
	defer pg.Close()
	up, err := cfg.OpenUpstream(ctx, cc, log)
	if err != nil {
		return sum, err
	}
	defer func() { err = errors.Join(err, up.Close(ctx)) }()
	if _, err := up.WaitHead(ctx, remoteWait); err != nil {
		return sum, err
	}
	v := &verifier{store: pg.Chain(cc.ChainID, cc.Name), remoteHash: up.BlockHash, conc: a.conc}
	return v.run(ctx, a, newProgress(stderr, a.to-a.from+1, "verify"))
}

// verifier walks a chain's stored blocks in pages: each page's parent
// links (with the page before), each block's hash against the remotes'
// (a few at once), and with purge the page's foreign blocks removed in one
// transaction.
type verifier struct {
	store      verifyStore
	remoteHash func(ctx context.Context, n uint64) (string, error)
	conc       int

	checked, holes atomic.Uint64 // progress
}

func (v *verifier) run(ctx context.Context, a verifyArgs, p *progress) (verifySummary, error) {
	start := time.Now()
	sum := verifySummary{from: a.from, to: a.to, purging: a.purge}
	stopProgress := p.start(&v.checked, &v.holes)
	var (
		prev *blockstore.StoredRef
		next = a.from
		err  error
	)
	for next <= a.to {
		var page []blockstore.StoredRef
		if page, err = v.store.Refs(ctx, next, a.to, verifyPage); err != nil {
			break
		}
		if len(page) == 0 {
			v.holes.Add(a.to - next + 1)
			break
		}
		hashes := make([]string, len(page))
		errs := make([]error, len(page))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(v.conc)
		for i := range page {
			g.Go(func() error {
				hashes[i], errs[i] = v.remoteHash(gctx, page[i].Number)
				v.checked.Add(1)
				return gctx.Err()
			})
		}
		if err = g.Wait(); err != nil {
			break
		}
		var foreign []blockstore.StoredRef
		for i, b := range page {
			v.holes.Add(b.Number - next)
			next = b.Number + 1
			sum.stored++
			if prev != nil && prev.Number+1 == b.Number && prev.Hash != b.Parent {
				sum.broken = addRange(sum.broken, b.Number)
			}
			prev = &page[i]
			switch {
			case errs[i] != nil || hashes[i] == "":
				sum.nUnchecked++
				sum.unchecked = addRange(sum.unchecked, b.Number)
			case hashes[i] == b.Hash:
				sum.canonical++
			default:
				sum.nForeign++
				sum.foreign = addRange(sum.foreign, b.Number)
				foreign = append(foreign, b)
			}
		}
		if a.purge && len(foreign) > 0 {
			var got blockstore.Purged
			if got, err = v.store.Purge(ctx, foreign); err != nil {
				err = fmt.Errorf("purge: %w", err)
				break
			}
			sum.purged.Blocks += got.Blocks
			sum.purged.Transactions += got.Transactions
			sum.purged.Logs += got.Logs
			sum.purged.Uncovered = mergeRanges(sum.purged.Uncovered, got.Uncovered)
		}
	}
	stopProgress(err == nil)
	sum.took = time.Since(start)
	return sum, err
}

// mergeRanges appends ascending ranges b to a, merging touching ones.
func mergeRanges(a, b []blockstore.Range) []blockstore.Range {
	for _, r := range b {
		if k := len(a); k > 0 && a[k-1].To+1 >= r.From {
			a[k-1].To = max(a[k-1].To, r.To)
			continue
		}
		a = append(a, r)
	}
	return a
}
