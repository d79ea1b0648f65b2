// Command vennbench measures the cost of venn's gateway hop against the
// floor cost of one Go HTTP hop on the same machine.
//
// It starts three child processes — a fake EVM node (the upstream), a plain
// httputil.ReverseProxy in front of it, and venn in front of it — and drives
// eth_getBalance calls with a fresh address per call (so no cache helps)
// through each target at several concurrencies, interleaving the targets
// within every round so a noisy machine hurts all of them alike. It reports
// throughput, p50 and p99 latency and CPU time per request of each child
// (from /proc/PID/stat), then venn's ratios against the plain proxy.
//
// Two more modes run venn as a cluster (a private redis-server, a leader
// and followers sharing the chain's head window): `vennbench head` drives
// the calls a follower answers from its window (eth_blockNumber, the latest
// block, its logs) against the plain proxy passing them to the upstream,
// and `vennbench propagation` mines blocks one at a time and times how
// long until the leader and every follower serve each one.
//
// `vennbench cache` replays 4 simulated indexers' state reads (eth_call,
// eth_getBalance, eth_getCode at settled blocks) through a 2-replica
// cluster, direct and through the plain proxy: upstream calls per client
// call, hits by tier, the throughput of hits, memory per entry.
//
// `vennbench filters` makes 1,000 log filters on a 2-replica cluster and
// polls each once a second, round robin over the replicas, against the
// same rate of eth_getLogs through the plain proxy: upstream calls per
// poll, the follower's CPU per poll, p50 and p99 latency.
//
// `vennbench history` (in process, with a Postgres on 127.0.0.1) fills a
// history store with 1,000,000 blocks of the fake node's chain, logs from
// 1,000 contracts, and times a selective eth_getLogs (one contract, one
// event, 10,000 blocks) and a wide one (every block), served from the store
// against the same queries split over a range-capped remote.
//
// `vennbench nats` serves the same calls over NATS request/reply and over
// HTTP from one venn (a private nats-server beside it): throughput, p50
// and p99, and the CPU per call of venn and of nats-server.
//
// `vennbench grpc` serves the same calls as one-item NativeCalls of
// Dshackle's gRPC API and over HTTP from one follower (head-served and
// forwarded), then fans newHeads out to 1,000 NativeSubscribe streams and
// to 1,000 WebSocket subscribers: throughput, latency, the follower's CPU
// per call and per notification.
//
// The same binary is the children: `vennbench upstream` and
// `vennbench proxy` are re-executed from os.Args[0]. Only 127.0.0.1 is used.
//
//	go run ./cmd/vennbench [-duration 10s] [-rounds 3] [-conc 1,32,128] [-targets direct,proxy,venn,venn-nocache] [-venn PATH]
//	go run ./cmd/vennbench head [-duration 10s] [-rounds 3] [-conc 1,32,128] [-calls ...] [-venn PATH]
//	go run ./cmd/vennbench propagation [-blocks 200] [-followers 2] [-venn PATH]
//	go run ./cmd/vennbench shape [-shapes l2,base,bsc,mainnet] [-remotes http,ws] [-duration 60s] [-baseline PATH] [-venn PATH]
//	go run ./cmd/vennbench subs [-clients 10000] [-blocks 60] [-venn PATH]
//	go run ./cmd/vennbench cache [-duration 10s] [-rounds 3] [-conc 1,128] [-indexers 4] [-cache YAML] [-venn PATH]
//	go run ./cmd/vennbench filters [-filters 1000] [-duration 20s] [-rounds 3] [-block-time 1s] [-venn PATH]
//	go run ./cmd/vennbench nats [-duration 10s] [-rounds 3] [-conc 1,32,128] [-calls chainId,balance] [-venn PATH]
//	go run ./cmd/vennbench grpc [-duration 10s] [-rounds 3] [-conc 1,128] [-calls blockNumber,block,balance] [-subscribers 1000] [-sub-blocks 20] [-venn PATH]
//	go run ./cmd/vennbench history [-blocks 1000000] [-contracts 1000] [-range 10000] [-runs 100] [-remote-runs 3] [-cap 1000] [-latency 0s,50ms] [-pg URL]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Defaults of the bench flags.
const (
	defaultDuration = 10 * time.Second
	defaultWarmup   = 1500 * time.Millisecond
	defaultRounds   = 3
	defaultConc     = "1,32,128"
	defaultTargets  = "direct,proxy,venn"

	// maxConcurrency bounds -conc: every worker is a goroutine with its own
	// connection, and the children's pools are sized for 1024.
	maxConcurrency = 1024
	// maxRounds and maxDuration keep a mistyped flag from running for hours.
	maxRounds   = 50
	maxDuration = 5 * time.Minute
)

const usage = `vennbench — venn gateway overhead benchmark

Usage:
  vennbench [flags]                       run the benchmark (flags below)
  vennbench head [flags]                  head-served calls of a venn follower vs the proxy (head -h)
  vennbench propagation [flags]           time from a new block to every replica serving it (propagation -h)
  vennbench shape [flags]                 real-sized heads on a chain's schedule to subscribers on 2 replicas (shape -h)
  vennbench subs [flags]                  many subscribers on one replica: latency, memory, CPU (subs -h)
  vennbench history [flags]               eth_getLogs over 1,000,000 blocks from Postgres vs the remotes (history -h)
  vennbench cache [flags]                 indexers' state reads through a 2-replica cluster's cache vs the proxy (cache -h)
  vennbench filters [flags]               log filters polled across 2 replicas vs eth_getLogs through the proxy (filters -h)
  vennbench nats [flags]                  JSON-RPC over NATS request/reply vs HTTP on one venn (nats -h)
  vennbench grpc [flags]                  Dshackle's gRPC API vs JSON-RPC on one follower: calls, newHeads fan-out (grpc -h)
  vennbench upstream -listen ADDR         serve the fake EVM node; prints its URL
  vennbench proxy -listen ADDR -to URL    serve a plain httputil.ReverseProxy; prints its URL

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the benchmark or one child role and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if len(args) > 0 {
		switch args[0] {
		case "upstream":
			return serveUpstream(ctx, args[1:], stdout, stderr)
		case "proxy":
			return serveProxy(ctx, args[1:], stdout, stderr)
		case "head":
			return runBench(ctx, args[1:], stdout, stderr, parseHeadFlags, headBench)
		case "history":
			return runBench(ctx, args[1:], stdout, stderr, parseHistoryFlags, historyBench)
		case "cache":
			return runBench(ctx, args[1:], stdout, stderr, parseCacheFlags, cacheBench)
		case "filters":
			return runBench(ctx, args[1:], stdout, stderr, parseFiltersFlags, filtersBench)
		case "subs":
			return runBench(ctx, args[1:], stdout, stderr, parseSubsFlags, subsBench)
		case "propagation":
			return runBench(ctx, args[1:], stdout, stderr, parsePropagationFlags, propagationBench)
		case "shape":
			return runBench(ctx, args[1:], stdout, stderr, parseShapeFlags, shapeBench)
		case "nats":
			return runBench(ctx, args[1:], stdout, stderr, parseNATSFlags, natsBench)
		case "grpc":
			return runBench(ctx, args[1:], stdout, stderr, parseGRPCFlags, grpcBench)
		}
	}
	return runBench(ctx, args, stdout, stderr, parseBenchFlags, bench)
}

// runBench parses a bench's flags and runs it: the exit code.
func runBench[C any](ctx context.Context, args []string, stdout, stderr io.Writer,
	parse func([]string, io.Writer) (C, int), bench func(context.Context, C, io.Writer, io.Writer) error) int {
	cfg, code := parse(args, stderr)
	if code >= 0 {
		return code
	}
	return exitCode(bench(ctx, cfg, stdout, stderr), stderr)
}

// newFlags is the flag set of `vennbench NAME` (name "" for the gateway
// bench): its errors go to stderr, and -h prints usage, then the flags.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(strings.TrimSpace("vennbench "+name), flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs: -1 to go on, or the exit code when the
// run must stop here (0 after -h; a usage error, or an argument that is
// not a flag).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage
	}
	return -1
}

// exitCode reports a bench's error and returns the exit code.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "vennbench: interrupted")
		return exitError
	default:
		fmt.Fprintf(stderr, "vennbench: %v\n", err)
		return exitError
	}
}

// benchConfig is the parsed command line of a benchmark run.
type benchConfig struct {
	Duration time.Duration // measured window per target and concurrency
	Warmup   time.Duration // unmeasured load just before each window
	Rounds   int
	Conc     []int
	Targets  []string // subset of direct, proxy, venn, venn-nocache, in this order
	Venn     string   // venn binary; "" builds ./cmd/venn
	// Profile, when set, is where each venn window's CPU, allocation and
	// (at its end) heap profiles go: PREFIX.TARGET.rROUND.cCONC.{cpu,allocs,heap}.
	Profile string
}

// parseBenchFlags returns the config and -1, or an exit code when the run
// must stop here (help or a usage error).
func parseBenchFlags(args []string, stderr io.Writer) (benchConfig, int) {
	fs := newFlags("", usage, stderr)
	var cfg benchConfig
	fs.DurationVar(&cfg.Duration, "duration", defaultDuration, "measured window per target and concurrency")
	fs.DurationVar(&cfg.Warmup, "warmup", defaultWarmup, "unmeasured load before each window")
	fs.IntVar(&cfg.Rounds, "rounds", defaultRounds, "rounds; each measures every target at every concurrency")
	conc := fs.String("conc", defaultConc, "comma-separated concurrencies")
	targets := fs.String("targets", defaultTargets, "comma-separated targets to measure (direct, proxy, venn, venn-nocache: venn with the chain's cache off)")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	fs.StringVar(&cfg.Profile, "profile", "", "write each venn window's CPU and allocation profiles, and its heap at the end, to PREFIX.TARGET.rROUND.cCONC.{cpu,allocs,heap} (go tool pprof)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	var err error
	if cfg.Conc, err = parseConc(*conc); err != nil {
		fmt.Fprintf(stderr, "vennbench: -conc: %v\n", err)
		return cfg, exitUsage
	}
	if cfg.Targets, err = parseTargets(*targets); err != nil {
		fmt.Fprintf(stderr, "vennbench: -targets: %v\n", err)
		return cfg, exitUsage
	}
	switch {
	case cfg.Duration <= 0 || cfg.Duration > maxDuration:
		fmt.Fprintf(stderr, "vennbench: -duration must be in (0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Warmup < 0 || cfg.Warmup > maxDuration:
		fmt.Fprintf(stderr, "vennbench: -warmup must be in [0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Rounds < 1 || cfg.Rounds > maxRounds:
		fmt.Fprintf(stderr, "vennbench: -rounds must be in [1, %d]\n", maxRounds)
		return cfg, exitUsage
	}
	return cfg, -1
}

func parseConc(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxConcurrency {
			return nil, fmt.Errorf("%q is not a concurrency in [1, %d]", f, maxConcurrency)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseTargets keeps the canonical order direct, proxy, venn, venn-nocache
// whatever the order given, so every round interleaves them the same way.
func parseTargets(s string) ([]string, error) {
	want := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case targetDirect, targetProxy, targetVenn, targetNoCache:
			want[f] = true
		default:
			return nil, fmt.Errorf("unknown target %q", f)
		}
	}
	var out []string
	for _, t := range []string{targetDirect, targetProxy, targetVenn, targetNoCache} {
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}
