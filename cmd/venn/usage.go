package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	vusage "github.com/venn-gateway/venn/usage"
)

// usageCmd prints tenants' usage from the usage table of the history
// store: venn usage --config FILE [--tenant T] --from DAY --to DAY
// [--format csv|json].
func usageCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("usage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file with postgres.url (required)")
	tenant := fs.String("tenant", "", "the tenant (or key without one); every tenant when empty")
	today := time.Now().UTC().Format(time.DateOnly)
	fromS := fs.String("from", today, "first day, YYYY-MM-DD (UTC)")
	toS := fs.String("to", today, "last day, YYYY-MM-DD (UTC), included")
	format := fs.String("format", vusage.FormatCSV, "csv or json")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	from, err := vusage.ParseDay(*fromS)
	if err != nil {
		fmt.Fprintf(stderr, "venn usage: --from: %v\n", err)
		return exitUsage
	}
	to, err := vusage.ParseDay(*toS)
	if err != nil {
		fmt.Fprintf(stderr, "venn usage: --to: %v\n", err)
		return exitUsage
	}
	if *format != vusage.FormatCSV && *format != vusage.FormatJSON {
		fmt.Fprintf(stderr, "venn usage: --format must be csv or json\n")
		return exitUsage
	}
	cfg, code := loadHistoryConfig(*configPath, "usage", stderr)
	if cfg == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := vusage.QueryURL(ctx, cfg.Postgres.URL, *tenant, from, to)
	if err != nil {
		fmt.Fprintf(stderr, "venn usage: %v\n", err)
		return exitError
	}
	if err := vusage.Write(stdout, rows, *format); err != nil {
		fmt.Fprintf(stderr, "venn usage: %v\n", err)
		return exitError
	}
	return exitOK
}
