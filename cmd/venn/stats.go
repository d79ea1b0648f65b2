package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/migrations"
)

// historyStats prints the size of every chain's stored history: its
// partitions, the ranges it holds, and rows and bytes by table.
func historyStats(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("history stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file with postgres.url (required)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, code := loadHistoryConfig(*configPath, "history stats", stderr)
	if cfg == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stats, err := readStats(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "venn history stats: %v\n", err)
		return exitError
	}
	writeStats(stdout, cfg, stats)
	return exitOK
}

func readStats(ctx context.Context, cfg *app.Config, stderr io.Writer) ([]blockstore.ChainStats, error) {
	if _, err := migrations.Up(ctx, cfg.Postgres.URL, cliLogger(cfg, stderr)); err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	pg, err := cfg.Postgres.Open(ctx, blockstore.Options{Logger: cliLogger(cfg, stderr)})
	if err != nil {
		return nil, errors.New("postgres.url: cannot be used (check its host and options)")
	}
	defer pg.Close()
	return pg.Stats(ctx)
}

// writeStats prints one line per chain and table; chains the
// configuration does not name are shown by id.
func writeStats(w io.Writer, cfg *app.Config, stats []blockstore.ChainStats) {
	if len(stats) == 0 {
		fmt.Fprintln(w, "no history stored")
		return
	}
	names := map[uint64]string{}
	for _, cc := range cfg.Chains {
		names[cc.ChainID] = cc.Name
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "chain\tchain id\tpartitions\tblocks stored\tranges\ttable\trows (estimate)\tbytes\tbytes per block\t")
	for _, s := range stats {
		name := names[s.ChainID]
		if name == "" {
			name = "(not configured)"
		}
		var blocks uint64
		for _, r := range s.Covered {
			blocks += r.To - r.From + 1
		}
		span := "-"
		if len(s.Covered) > 0 {
			span = fmt.Sprintf("%d..%d", s.Covered[0].From, s.Covered[len(s.Covered)-1].To)
		}
		perBlock := func(b int64) string {
			if blocks == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", float64(b)/float64(blocks))
		}
		for i, t := range s.Tables {
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s (%d)\t", name, s.ChainID, s.Partitions, blocks, span, len(s.Covered))
			} else {
				fmt.Fprint(tw, "\t\t\t\t\t")
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t\n", t.Table, t.Rows, t.Bytes, perBlock(t.Bytes))
		}
		fmt.Fprintf(tw, "\t\t\t\t\tall\t\t%d\t%s\t\n", s.Bytes(), perBlock(s.Bytes()))
	}
	tw.Flush()
}
