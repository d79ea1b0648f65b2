// Command venn is the gateway binary. main only calls run and exits: every
// subcommand returns its exit code, so tests drive run directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/venn-gateway/venn/app"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3". Without
// it the module version or VCS revision from the build info is printed.
var version = ""

const usage = `venn — clustered EVM JSON-RPC gateway

Usage:
  venn serve [--config FILE]   run the gateway until SIGINT or SIGTERM; SIGHUP
                               reloads FILE (no --config: built-in Ethereum
                               mainnet default, nothing to reload)
  venn check-config FILE       validate FILE and print every problem
  venn migrate --config FILE   apply the history store's migrations (postgres.url)
  venn backfill --config FILE --chain NAME --from A --to B [--concurrency N]
                               store a chain's settled blocks A..B in the history
                               store; resumable, and safe on several replicas at once
  venn history verify --config FILE --chain NAME --from A --to B [--purge] [--concurrency N]
                               check the stored blocks A..B against the chain's
                               remotes (hashes, parent links); --purge removes
                               those of another chain
  venn history stats --config FILE
                               print each chain's stored history: partitions,
                               ranges, rows and bytes by table
  venn probe [--timeout 2s] URL
                               GET URL (e.g. http://127.0.0.1:9545/healthz); exit 0
                               on a 2xx answer: a container health check
  venn status [--admin URL] [--token TOKEN]
                               print a running replica's chains, remotes (in
                               rotation or not, and why) and the cluster's
                               replicas, from its admin API (default
                               http://127.0.0.1:9546; env VENN_ADMIN_URL and
                               VENN_ADMIN_TOKEN)
  venn usage --config FILE [--tenant T] [--from DAY] [--to DAY] [--format csv|json]
                               print tenants' usage per chain, method and day
                               (calls, credits, errors, bytes out) from the
                               history store's usage table (default: today)
  venn tenants --config FILE list | put-tenant FILE | put-key FILE |
               delete-tenant NAME | delete-key NAME
                               the tenants and API keys kept in Redis (auth.redis):
                               FILE (or - for stdin) is one entry as the config file
                               spells it, checked against it before it is written;
                               every replica applies a change within auth.redis.refresh
  venn version                 print the version
  venn help                    print this help
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(rest, stderr)
	case "check-config":
		return checkConfig(rest, stdout, stderr)
	case "migrate":
		return migrate(rest, stdout, stderr)
	case "backfill":
		return backfill(rest, stdout, stderr)
	case "history":
		return history(rest, stdout, stderr)
	case "probe":
		return probe(rest, stdout, stderr)
	case "status":
		return status(rest, stdout, stderr)
	case "usage":
		return usageCmd(rest, stdout, stderr)
	case "tenants":
		return tenantsCmd(rest, os.Stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "venn", versionString())
		return exitOK
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "venn: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (default: built-in Ethereum mainnet)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "venn serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := app.Load(*configPath)
	if err != nil {
		printErrors(stderr, err)
		return exitError
	}

	// The fx app stops on SIGINT/SIGTERM itself (Wait); this context only
	// lets a second signal abort a slow start.
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	fxApp := app.New(cfg, app.LogOutput(stderr), app.WithBuild(app.BuildInfo{Version: versionString()}))
	startCtx, cancelStart := context.WithTimeout(sigCtx, fxApp.StartTimeout())
	defer cancelStart()
	if err := fxApp.Start(startCtx); err != nil {
		fmt.Fprintf(stderr, "venn: start: %v\n", err)
		return exitError
	}
	sig := <-fxApp.Wait()

	// A second signal during the drain means "now": exit without waiting.
	force := make(chan os.Signal, 1)
	signal.Notify(force, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	defer func() {
		signal.Stop(force)
		close(stopped)
	}()
	go func() {
		select {
		case <-force:
			fmt.Fprintln(stderr, "venn: second signal, exiting without draining")
			os.Exit(exitError)
		case <-stopped:
		}
	}()

	// shutdown_delay comes first (still serving), then the drain gets all of
	// shutdown_timeout.
	stopCtx, cancelStop := context.WithTimeout(context.Background(), cfg.ShutdownDelay+cfg.ShutdownTimeout)
	defer cancelStop()
	if err := fxApp.Stop(stopCtx); err != nil {
		fmt.Fprintf(stderr, "venn: stop: %v\n", err)
		return exitError
	}
	return sig.ExitCode
}

func checkConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "usage: venn check-config FILE\n")
		return exitUsage
	}
	cfg, err := app.Load(args[0])
	if err != nil {
		printErrors(stderr, err)
		return exitError
	}
	fmt.Fprintf(stdout, "ok: %d chains, %d remotes\n", len(cfg.Chains), cfg.RemoteCount())
	return exitOK
}

func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}
