package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/migrations"
	"github.com/venn-gateway/venn/stalker"
)

// Backfill flag bounds.
const (
	defaultBackfillConcurrency = 8
	maxBackfillConcurrency     = 256
)

// migrate applies the history store's migrations and prints what it did.
func migrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file with postgres.url (required)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, code := loadHistoryConfig(*configPath, "migrate", stderr)
	if cfg == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	applied, err := migrations.Up(ctx, cfg.Postgres.URL, cliLogger(cfg, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "venn migrate: %v\n", err)
		return exitError
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema up to date: no migration to apply")
		return exitOK
	}
	versions := make([]string, len(applied))
	for i, v := range applied {
		versions[i] = fmt.Sprint(v)
	}
	fmt.Fprintf(stdout, "applied migrations: %s\n", strings.Join(versions, ", "))
	return exitOK
}

// rangeFlags are the flags of a subcommand that works on a range of a
// configured chain's history: --config, --chain, --from, --to and
// --concurrency.
type rangeFlags struct {
	fs            *flag.FlagSet
	config, chain *string
	from, to      *uint64
	conc          *int
}

func newRangeFlags(fs *flag.FlagSet, toHelp, concHelp string) *rangeFlags {
	return &rangeFlags{
		fs:     fs,
		config: fs.String("config", "", "configuration file with postgres.url (required)"),
		chain:  fs.String("chain", "", "chain name from the configuration (required)"),
		from:   fs.Uint64("from", 0, "first block number"),
		to:     fs.Uint64("to", 0, toHelp),
		conc:   fs.Int("concurrency", defaultBackfillConcurrency, concHelp),
	}
}

// load checks the parsed flags and loads the configuration and its chain;
// a nil configuration means exit with code, the problem told on stderr.
func (rf *rangeFlags) load(stderr io.Writer) (*app.Config, app.ChainConfig, int) {
	name := "venn " + rf.fs.Name()
	set := map[string]bool{}
	rf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *rf.chain == "":
		fmt.Fprintf(stderr, "%s: --chain is required\n", name)
		return nil, app.ChainConfig{}, exitUsage
	case !set["to"]:
		fmt.Fprintf(stderr, "%s: --to is required\n", name)
		return nil, app.ChainConfig{}, exitUsage
	case *rf.from > *rf.to:
		fmt.Fprintf(stderr, "%s: --from %d is above --to %d\n", name, *rf.from, *rf.to)
		return nil, app.ChainConfig{}, exitUsage
	case *rf.conc < 1 || *rf.conc > maxBackfillConcurrency:
		fmt.Fprintf(stderr, "%s: --concurrency must be in [1, %d]\n", name, maxBackfillConcurrency)
		return nil, app.ChainConfig{}, exitUsage
	}
	cfg, code := loadHistoryConfig(*rf.config, rf.fs.Name(), stderr)
	if cfg == nil {
		return nil, app.ChainConfig{}, code
	}
	cc, ok := cfg.Chain(*rf.chain)
	if !ok {
		fmt.Fprintf(stderr, "%s: no chain %q in the configuration\n", name, *rf.chain)
		return nil, app.ChainConfig{}, exitUsage
	}
	return cfg, cc, 0
}

// backfill stores a chain's settled blocks from..to, fetched through its
// remotes, in the history store.
func backfill(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("backfill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rf := newRangeFlags(fs, "last block number (required; at most the settled line)", "blocks fetched at once")
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
	if err := runBackfill(ctx, backfillJob{cfg: cfg, cc: cc, from: *from, to: *to, conc: *conc}, stdout, stderr); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "venn backfill: interrupted; run it again to resume")
		} else {
			fmt.Fprintf(stderr, "venn backfill: %v\n", err)
		}
		return exitError
	}
	return exitOK
}

// backfillJob is what `venn backfill` was asked: the chain of a loaded
// configuration, the range and how many blocks to fetch at once.
type backfillJob struct {
	cfg      *app.Config
	cc       app.ChainConfig
	from, to uint64
	conc     int
}

// runBackfill sets up what serve would for the chain (its remotes pool,
// the history store, migrated) without the server, and backfills.
func runBackfill(ctx context.Context, job backfillJob, stdout, stderr io.Writer) (err error) {
	cfg, cc, from, to := job.cfg, job.cc, job.from, job.to
	log := cliLogger(cfg, stderr)
	if _, err := migrations.Up(ctx, cfg.Postgres.URL, log); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	pg, err := cfg.Postgres.Open(ctx, blockstore.Options{Logger: log})
	if err != nil {
		return errors.New("postgres.url: cannot be used (check its host and options)")
	}
	defer pg.Close()
	up, err := cfg.OpenUpstream(ctx, cc, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, up.Close(ctx)) }()
	head, err := up.WaitHead(ctx, remoteWait)
	if err != nil {
		return err
	}
	line, ok := stalker.Settled(head, up.Finalized(ctx), cc.History.Confirmations)
	if !ok || from > line {
		return fmt.Errorf("chain %s: nothing settled from %d: the settled line is %d (head %d, %d confirmations or finalized)",
			cc.Name, from, line, head, cc.History.Confirmations)
	}
	if to > line {
		fmt.Fprintf(stderr, "venn backfill: blocks above the settled line %d are not stored: backfilling %d..%d\n", line, from, line)
		to = line
	}
	b, err := newBackfiller(ctx, backfillSpec{url: cfg.Postgres.URL, chainID: cc.ChainID, conc: job.conc, batch: cc.History.Batch},
		pg.Chain(cc.ChainID, cc.Name), up.FetchBlock)
	if err != nil {
		return err
	}
	defer b.close()
	sum, err := b.run(ctx, from, to, newProgress(stderr, to-from+1, "backfill"))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backfilled %s %d..%d: %d blocks stored, %d already stored, in %s\n",
		cc.Name, from, to, sum.stored, sum.skipped, sum.took.Round(time.Millisecond))
	return nil
}

// remoteWait bounds how long a backfill waits for a first ready remote
// beyond what the pool's Start waited.
const remoteWait = 30 * time.Second

// parseFlags parses a subcommand's flags; ok false means exit with code.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "venn %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return 0, true
}

// loadHistoryConfig loads a configuration that must name a history store;
// nil and the exit code when it can't.
func loadHistoryConfig(path, cmd string, stderr io.Writer) (*app.Config, int) {
	if path == "" {
		fmt.Fprintf(stderr, "venn %s: --config is required\n", cmd)
		return nil, exitUsage
	}
	cfg, err := app.Load(path)
	if err != nil {
		printErrors(stderr, err)
		return nil, exitError
	}
	if cfg.Postgres.URL == "" {
		fmt.Fprintf(stderr, "venn %s: postgres.url is not set in %s\n", cmd, path)
		return nil, exitError
	}
	return cfg, exitOK
}

// cliLogger logs warnings and errors (or more, by log.level) to stderr,
// so they interleave with the progress lines but don't drown them.
func cliLogger(cfg *app.Config, stderr io.Writer) *slog.Logger {
	level := slog.LevelWarn
	var l slog.Level
	if l.UnmarshalText([]byte(cfg.Log.Level)) == nil && l > level {
		level = l
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}
