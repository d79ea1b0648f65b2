package main

// `vennbench nats`: JSON-RPC over NATS request/reply against the same
// calls over HTTP, on one venn, in the same run. Its children: the fake
// upstream, a private nats-server (no JetStream, a free port) and venn
// with `nats: {url}`. For each call, concurrency and round, the two
// transports are measured one after the other (their order alternating
// by round): req/s, p50 and p99 latency as the client sees them, venn's
// CPU per call and nats-server's (HTTP's row shows what nats-server
// spends idle). HTTP goes through the raw client (hand-spoken HTTP/1.1),
// NATS through nats.go, one connection per worker for both.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/venn-gateway/venn/internal/freeport"
)

// The transports `vennbench nats` compares.
const (
	transportHTTP = "http"
	transportNATS = "nats"
)

const natsUsage = `vennbench nats — JSON-RPC over NATS request/reply against HTTP, on one venn

Usage:
  vennbench nats [flags]

Calls:
  chainId   eth_chainId: venn answers it itself (the transports' own cost)
  balance   eth_getBalance of a fresh address: one call to the upstream each

Flags:
`

const (
	defaultNATSCalls = "chainId,balance"
	// natsReadyTimeout bounds the wait for nats-server and for venn's
	// subscription.
	natsReadyTimeout = 20 * time.Second
)

type natsBenchConfig struct {
	Duration, Warmup time.Duration
	Rounds           int
	Conc             []int
	Calls            []string
	Venn             string
	NATSServer       string
}

func parseNATSFlags(args []string, stderr io.Writer) (natsBenchConfig, int) {
	fs := newFlags("nats", natsUsage, stderr)
	var cfg natsBenchConfig
	fs.DurationVar(&cfg.Duration, "duration", defaultDuration, "measured window per call, transport and concurrency")
	fs.DurationVar(&cfg.Warmup, "warmup", defaultWarmup, "unmeasured load before each window")
	fs.IntVar(&cfg.Rounds, "rounds", defaultRounds, "rounds; each measures every call, transport and concurrency")
	conc := fs.String("conc", defaultConc, "comma-separated concurrencies")
	calls := fs.String("calls", defaultNATSCalls, "comma-separated calls (chainId, balance)")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	fs.StringVar(&cfg.NATSServer, "nats-server", "", "nats-server binary (default: nats-server on the PATH, else /usr/sbin/nats-server)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	var err error
	if cfg.Conc, err = parseConc(*conc); err != nil {
		fmt.Fprintf(stderr, "vennbench nats: -conc: %v\n", err)
		return cfg, exitUsage
	}
	if cfg.Calls, err = parseNames(*calls, []string{"chainId", "balance"}); err != nil {
		fmt.Fprintf(stderr, "vennbench nats: -calls: %v\n", err)
		return cfg, exitUsage
	}
	switch {
	case cfg.Duration <= 0 || cfg.Duration > maxDuration:
		fmt.Fprintf(stderr, "vennbench nats: -duration must be in (0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Warmup < 0 || cfg.Warmup > maxDuration:
		fmt.Fprintf(stderr, "vennbench nats: -warmup must be in [0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Rounds < 1 || cfg.Rounds > maxRounds:
		fmt.Fprintf(stderr, "vennbench nats: -rounds must be in [1, %d]\n", maxRounds)
		return cfg, exitUsage
	}
	return cfg, -1
}

// natsPoster sends each call as a NATS request on a connection of its
// own.
type natsPoster struct {
	nc      *natsgo.Conn
	subject string
}

func newNATSPosters(url, subject string) func() poster {
	return func() poster {
		nc, err := natsgo.Connect(url, natsgo.NoReconnect())
		if err != nil {
			return errPoster{fmt.Errorf("nats connect: %w", err)}
		}
		return &natsPoster{nc: nc, subject: subject}
	}
}

func (p *natsPoster) post(_ context.Context, body []byte, reply *bytes.Buffer) error {
	m, err := p.nc.Request(p.subject, body, requestTimeout)
	if err != nil {
		return err
	}
	reply.Reset()
	reply.Write(m.Data)
	return nil
}

func (p *natsPoster) close() { p.nc.Close() }

// natsSample is one window of one call over one transport.
type natsSample struct {
	Round     int
	Call      string
	Transport string
	Conc      int
	OK        int
	Errors    int
	ErrText   []string
	RPS       float64
	P50, P99  time.Duration
	VennCPU   time.Duration // per call
	ServerCPU time.Duration // nats-server's, per call
}

func (s natsSample) String() string {
	return fmt.Sprintf("%-8s %-4s c=%-3d %8.0f req/s p50 %s p99 %s venn %s/call nats-server %s/call errors %d",
		s.Call, s.Transport, s.Conc, s.RPS, us(s.P50), us(s.P99), us(s.VennCPU), us(s.ServerCPU), s.Errors)
}

func natsBench(ctx context.Context, cfg natsBenchConfig, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	tmp, err := os.MkdirTemp("", "vennbench-nats-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	vennBin, err := buildVennIfNeeded(ctx, cfg.Venn, tmp, stderr)
	if err != nil {
		return err
	}
	l, err := newLoader()
	if err != nil {
		return err
	}
	defer l.close()

	up, upURL, err := l.startUpstream(ctx, exe)
	if err != nil {
		return err
	}
	defer up.Stop()
	ns, natsURL, err := startNATSServer(ctx, cfg.NATSServer)
	if err != nil {
		return err
	}
	defer ns.Stop()
	v, vURL, _, err := startVenn(ctx, l, vennBin, upURL, tmp, "nats: {url: \""+natsURL+"\"}", "")
	if err != nil {
		return err
	}
	defer v.Stop()
	subject := "venn.bench.rpc"
	if err := waitNATSServes(ctx, natsURL, subject); err != nil {
		return fmt.Errorf("venn does not serve over NATS: %w%s", err, v.StderrNote())
	}

	calls := map[string]callKind{
		"chainId": {name: "chainId", request: fixedRequest("eth_chainId", `[]`), check: checkQuantity},
		"balance": l.balance,
	}
	transports := []string{transportHTTP, transportNATS}
	posters := map[string]func() poster{
		transportHTTP: rawPosters(vURL),
		transportNATS: newNATSPosters(natsURL, subject),
	}
	env := machineInfo()
	loadBefore := loadAvg()
	fmt.Fprintf(stderr, "%s; %d rounds × %v (+%v warm-up) × conc %v × calls %v × http, nats\n",
		env, cfg.Rounds, cfg.Duration, cfg.Warmup, cfg.Conc, cfg.Calls)
	var samples []natsSample
	for round := 1; round <= cfg.Rounds; round++ {
		for _, call := range cfg.Calls {
			for _, conc := range cfg.Conc {
				order := slices.Clone(transports)
				if round%2 == 0 {
					slices.Reverse(order)
				}
				for _, tr := range order {
					if cfg.Warmup > 0 {
						l.runWith(ctx, conc, cfg.Warmup, calls[call], posters[tr])
					}
					v0, err := cpuTime(v.Pid())
					if err != nil {
						return err
					}
					n0, err := cpuTime(ns.Pid())
					if err != nil {
						return err
					}
					res := l.runWith(ctx, conc, cfg.Duration, calls[call], posters[tr])
					v1, err := cpuTime(v.Pid())
					if err != nil {
						return err
					}
					n1, err := cpuTime(ns.Pid())
					if err != nil {
						return err
					}
					if err := ctx.Err(); err != nil {
						return err
					}
					for _, c := range []*child{up, ns, v} {
						if done, werr := c.Exited(); done {
							return fmt.Errorf("%s exited during the run: %v%s", c.Name, werr, c.StderrNote())
						}
					}
					s := natsSample{Round: round, Call: call, Transport: tr, Conc: conc, OK: res.OK, Errors: res.Errors,
						ErrText: res.ErrSample, RPS: float64(res.OK) / res.Elapsed.Seconds(),
						P50: percentile(res.Latencies, 50), P99: percentile(res.Latencies, 99)}
					if n := res.OK + res.Errors; n > 0 {
						s.VennCPU = (v1 - v0) / time.Duration(n)
						s.ServerCPU = (n1 - n0) / time.Duration(n)
					}
					samples = append(samples, s)
					fmt.Fprintf(stderr, "round %d/%d %s\n", round, cfg.Rounds, s)
				}
			}
		}
	}
	return finish(stdout, &natsReport{samples: samples, cfg: cfg}, env, loadBefore)
}

// startNATSServer starts a private nats-server on a free port and waits
// until it greets a client.
func startNATSServer(ctx context.Context, bin string) (*child, string, error) {
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			bin = "/usr/sbin/nats-server"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, "", fmt.Errorf("nats-server not found (apt-get install -y nats-server, or -nats-server PATH): %w", err)
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, "", err
	}
	c, _, err := startChild(ctx, "nats-server", false, bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	err = waitFor(ctx, c, natsReadyTimeout, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 4)
		if _, err := io.ReadFull(conn, b); err != nil || string(b) != "INFO" {
			return errors.New("no INFO greeting")
		}
		return nil
	})
	if err != nil {
		c.Stop()
		return nil, "", err
	}
	return c, "nats://" + addr, nil
}

// waitNATSServes polls subject with eth_chainId until venn answers.
func waitNATSServes(ctx context.Context, url, subject string) error {
	nc, err := natsgo.Connect(url, natsgo.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	deadline := time.Now().Add(natsReadyTimeout)
	for {
		m, err := nc.Request(subject, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`), time.Second)
		if err == nil && bytes.Contains(m.Data, []byte(`"result"`)) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("answer %.200s", m.Data)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// natsReport prints the samples' medians per call, transport and
// concurrency, and NATS ÷ HTTP ratios (medians of per-round ratios).
type natsReport struct {
	samples []natsSample
	cfg     natsBenchConfig
}

func (r *natsReport) errors() int {
	n := 0
	for _, s := range r.samples {
		n += s.Errors
	}
	return n
}

func (r *natsReport) pick(call, tr string, conc, round int) (natsSample, bool) {
	for _, s := range r.samples {
		if s.Call == call && s.Transport == tr && s.Conc == conc && (round == 0 || s.Round == round) {
			return s, true
		}
	}
	return natsSample{}, false
}

func (r *natsReport) med(call, tr string, conc int, f func(natsSample) float64) float64 {
	var xs []float64
	for _, s := range r.samples {
		if s.Call == call && s.Transport == tr && s.Conc == conc {
			xs = append(xs, f(s))
		}
	}
	return median(xs)
}

func (r *natsReport) ratio(call string, conc int, f func(natsSample) float64) float64 {
	var xs []float64
	for round := 1; round <= r.cfg.Rounds; round++ {
		h, ok1 := r.pick(call, transportHTTP, conc, round)
		n, ok2 := r.pick(call, transportNATS, conc, round)
		if ok1 && ok2 && f(h) > 0 {
			xs = append(xs, f(n)/f(h))
		}
	}
	return median(xs)
}

func (r *natsReport) write(w io.Writer, env string) {
	fmt.Fprintf(w, "%s\n\nMedians over %d rounds of %v windows (after %v of warm-up each).\n\n", env, r.cfg.Rounds, r.cfg.Duration, r.cfg.Warmup)
	fmt.Fprintln(w, "| call | transport | conc | req/s | p50 µs | p99 µs | venn CPU µs/call | nats-server CPU µs/call | errors |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	rps := func(s natsSample) float64 { return s.RPS }
	p50 := func(s natsSample) float64 { return micros(s.P50) }
	p99 := func(s natsSample) float64 { return micros(s.P99) }
	vcpu := func(s natsSample) float64 { return micros(s.VennCPU) }
	ncpu := func(s natsSample) float64 { return micros(s.ServerCPU) }
	for _, call := range r.cfg.Calls {
		for _, conc := range r.cfg.Conc {
			for _, tr := range []string{transportHTTP, transportNATS} {
				errs := 0
				for _, s := range r.samples {
					if s.Call == call && s.Transport == tr && s.Conc == conc {
						errs += s.Errors
					}
				}
				fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %d |\n", call, tr, conc,
					r.med(call, tr, conc, rps), r.med(call, tr, conc, p50), r.med(call, tr, conc, p99),
					r.med(call, tr, conc, vcpu), r.med(call, tr, conc, ncpu), errs)
			}
		}
	}
	fmt.Fprintln(w, "\nNATS ÷ HTTP, medians of per-round ratios:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| call | conc | req/s | p50 | p99 | venn CPU/call | venn + nats-server CPU/call |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	both := func(s natsSample) float64 { return micros(s.VennCPU + s.ServerCPU) }
	for _, call := range r.cfg.Calls {
		for _, conc := range r.cfg.Conc {
			fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", call, conc,
				r.ratio(call, conc, rps), r.ratio(call, conc, p50), r.ratio(call, conc, p99),
				r.ratio(call, conc, vcpu), r.ratio(call, conc, both))
		}
	}
	if r.errors() > 0 {
		fmt.Fprintln(w, "\nErrors:")
		for _, s := range r.samples {
			for _, e := range s.ErrText {
				fmt.Fprintf(w, "- %s %s c=%d round %d: %s\n", s.Call, s.Transport, s.Conc, s.Round, strings.TrimSpace(e))
			}
		}
	}
}
