package main

// `vennbench grpc`: Dshackle's gRPC API (emerald.Blockchain) against
// JSON-RPC over HTTP, on one venn follower, in the same run. Its
// children: a private redis-server, the fake upstream (mining a block
// every -block-time), a venn leader and a venn follower with
// grpc_listen. Two parts:
//
//   - calls: for each call, concurrency and round, the same call as a
//     one-item NativeCall and as a JSON-RPC POST, one after the other
//     (their order alternating by round): req/s, p50 and p99 as the
//     client sees them, the follower's CPU per call, the share answered
//     from the head window and the upstream requests per call;
//   - fan-out: -subscribers NativeSubscribe newHeads streams, then as
//     many WebSocket eth_subscribe newHeads clients (the order alternating
//     by round), each on a connection of its own: the follower's CPU per
//     notification over -sub-blocks blocks, and per block with one
//     WebSocket subscriber for the idle cost.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/jsonscan"
)

// The transports `vennbench grpc` compares: transportHTTP and these.
const (
	transportGRPC = "grpc"
	transportWS   = "ws"
)

// grpcChainRef is the ChainRef the bench chain is served under (its
// grpc_id): chain id 1337 has none of its own.
const grpcChainRef = pb.ChainRef_CHAIN_ETHEREUM__MAINNET

const grpcUsage = `vennbench grpc — Dshackle's gRPC API against JSON-RPC, on one venn follower

Starts a private redis-server, the upstream (mining every -block-time), a
venn leader and a venn follower with grpc_listen; drives each call as a
one-item NativeCall and as an HTTP POST to the follower, interleaved, then
holds -subscribers NativeSubscribe newHeads streams and as many WebSocket
newHeads subscribers on it, one set at a time.

Calls:
  blockNumber  eth_blockNumber, from the follower's head window
  block        eth_getBlockByNumber("latest", false), from the head window
  balance      eth_getBalance of a fresh address: forwarded to the upstream

Flags:
`

const (
	defaultGRPCCalls       = "blockNumber,block,balance"
	defaultGRPCConc        = "1,128"
	defaultGRPCSubscribers = 1000
	defaultGRPCSubBlocks   = 20
	maxGRPCSubscribers     = 5000
	// grpcSubWait bounds the wait for every subscriber's first
	// notification, and for the measured blocks, in blocks.
	grpcSubWait = 10
)

type grpcBenchConfig struct {
	Duration, Warmup time.Duration
	Rounds           int
	Conc             []int
	Calls            []callKind
	Subscribers      int
	SubBlocks        int
	BlockTime        time.Duration
	SharedConn       bool
	StaticWindow     bool
	Venn             string
	Profile          string
}

func parseGRPCFlags(args []string, stderr io.Writer) (grpcBenchConfig, int) {
	fs := newFlags("grpc", grpcUsage, stderr)
	var cfg grpcBenchConfig
	fs.DurationVar(&cfg.Duration, "duration", defaultDuration, "measured window per call, transport and concurrency")
	fs.DurationVar(&cfg.Warmup, "warmup", defaultWarmup, "unmeasured load before each window")
	fs.IntVar(&cfg.Rounds, "rounds", defaultRounds, "rounds; each measures every call, transport and concurrency, then the fan-out")
	conc := fs.String("conc", defaultGRPCConc, "comma-separated concurrencies")
	calls := fs.String("calls", defaultGRPCCalls, "comma-separated calls (blockNumber, block, balance); empty: none")
	fs.IntVar(&cfg.Subscribers, "subscribers", defaultGRPCSubscribers, "newHeads subscribers per transport in the fan-out; 0: no fan-out")
	fs.IntVar(&cfg.SubBlocks, "sub-blocks", defaultGRPCSubBlocks, "blocks measured per fan-out window")
	fs.DurationVar(&cfg.BlockTime, "block-time", defaultHeadBlockTime, "the upstream mines a block this often")
	fs.BoolVar(&cfg.SharedConn, "shared-conn", false, "every gRPC load worker on one connection (streams multiplexed) instead of one each")
	fs.BoolVar(&cfg.StaticWindow, "static-window", false, "gRPC clients with fixed 1 MiB flow-control windows: no BDP pings for the server to answer")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	fs.StringVar(&cfg.Profile, "profile", "", "write the follower's CPU and allocation profiles of each call window to PREFIX.CALL.TRANSPORT.cCONC.rROUND.{cpu,allocs}, and of each fan-out window (at most its first 20 s) to PREFIX.fanout.TRANSPORT.cSUBSCRIBERS.rROUND.{cpu,allocs} (go tool pprof)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	var err error
	if cfg.Conc, err = parseConc(*conc); err != nil {
		fmt.Fprintf(stderr, "vennbench grpc: -conc: %v\n", err)
		return cfg, exitUsage
	}
	if strings.TrimSpace(*calls) != "" {
		if cfg.Calls, err = parseGRPCCalls(*calls); err != nil {
			fmt.Fprintf(stderr, "vennbench grpc: -calls: %v\n", err)
			return cfg, exitUsage
		}
	}
	switch {
	case cfg.Duration <= 0 || cfg.Duration > maxDuration:
		fmt.Fprintf(stderr, "vennbench grpc: -duration must be in (0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Warmup < 0 || cfg.Warmup > maxDuration:
		fmt.Fprintf(stderr, "vennbench grpc: -warmup must be in [0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Rounds < 1 || cfg.Rounds > maxRounds:
		fmt.Fprintf(stderr, "vennbench grpc: -rounds must be in [1, %d]\n", maxRounds)
		return cfg, exitUsage
	case cfg.Subscribers < 0 || cfg.Subscribers > maxGRPCSubscribers:
		fmt.Fprintf(stderr, "vennbench grpc: -subscribers must be in [0, %d]\n", maxGRPCSubscribers)
		return cfg, exitUsage
	case cfg.SubBlocks < 1 || cfg.BlockTime <= 0:
		fmt.Fprintln(stderr, "vennbench grpc: -sub-blocks and -block-time must be positive")
		return cfg, exitUsage
	}
	return cfg, -1
}

// parseGRPCCalls picks the head bench's blockNumber and block and the
// gateway bench's balance by name.
func parseGRPCCalls(s string) ([]callKind, error) {
	names, err := parseNames(s, []string{"blockNumber", "block", "balance"})
	if err != nil {
		return nil, err
	}
	var out []callKind
	for _, n := range names {
		if n == "balance" {
			out = append(out, callKind{name: "balance"}) // the loader's, filled in by the bench
			continue
		}
		i := slices.IndexFunc(headCalls, func(c callKind) bool { return c.name == n })
		out = append(out, headCalls[i])
	}
	return out, nil
}

// grpcPoster sends each JSON-RPC call as a one-item NativeCall and turns
// its reply back into the JSON-RPC answer the load checks.
type grpcPoster struct {
	cc     *grpc.ClientConn // nil when the connection is shared
	client pb.BlockchainClient
}

// grpcPosters returns a factory of gRPC posters for addr: each with a
// connection of its own, or all on shared when it is not nil.
func grpcPosters(addr string, static bool, shared *grpc.ClientConn) func() poster {
	return func() poster {
		if shared != nil {
			return &grpcPoster{client: pb.NewBlockchainClient(shared)}
		}
		cc, err := dialGRPC(addr, static)
		if err != nil {
			return errPoster{err}
		}
		return &grpcPoster{cc: cc, client: pb.NewBlockchainClient(cc)}
	}
}

// staticWindow is -static-window's flow-control window: setting one turns
// off grpc-go's BDP estimation, whose pings the server answers as it
// receives replies.
const staticWindow = 1 << 20

// dialGRPC is a plain-TCP client of addr; it connects on first use.
func dialGRPC(addr string, static bool) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if static {
		opts = append(opts, grpc.WithInitialWindowSize(staticWindow), grpc.WithInitialConnWindowSize(staticWindow))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpc client: %w", err)
	}
	return cc, nil
}

func (p *grpcPoster) post(ctx context.Context, body []byte, reply *bytes.Buffer) error {
	id := jsonscan.Member(body, "id")
	method := jsonscan.Member(body, "method")
	if len(method) < 2 {
		return fmt.Errorf("no method in %.100s", body)
	}
	req := &pb.NativeCallRequest{Chain: grpcChainRef, Items: []*pb.NativeCallItem{{
		Id: 1, Method: string(method[1 : len(method)-1]),
		Data: &pb.NativeCallItem_Payload{Payload: jsonscan.Member(body, "params")},
	}}}
	st, err := p.client.NativeCall(ctx, req)
	if err != nil {
		return err
	}
	item, err := st.Recv()
	if err != nil {
		return err
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the item: %v", err)
	}
	reply.Reset()
	reply.WriteString(`{"jsonrpc":"2.0","id":`)
	reply.Write(id)
	if !item.GetSucceed() {
		fmt.Fprintf(reply, `,"error":{"code":%d,"message":%q}}`, item.GetItemErrorCode(), item.GetErrorMessage())
		return nil
	}
	reply.WriteString(`,"result":`)
	reply.Write(item.GetPayload())
	reply.WriteByte('}')
	return nil
}

func (p *grpcPoster) close() {
	if p.cc != nil {
		_ = p.cc.Close()
	}
}

// grpcSample is one window of one call over one transport.
type grpcSample struct {
	Round      int
	Call       string
	Transport  string
	Conc       int
	OK, Errors int
	ErrText    []string
	RPS        float64
	P50, P99   time.Duration
	CPUPer     time.Duration // the follower's, per call
	FromWindow float64       // share answered from the head window
	UpReqPer   float64       // upstream requests per call
	LoadCPUPer time.Duration // this process's, per call
}

func (s grpcSample) String() string {
	b := fmt.Sprintf("%-11s %-4s c=%-3d %8.0f req/s p50 %s p99 %s follower %s/call, %.3f from window, %.2f upstream req/call, load %s/call",
		s.Call, s.Transport, s.Conc, s.RPS, us(s.P50), us(s.P99), us(s.CPUPer), s.FromWindow, s.UpReqPer, us(s.LoadCPUPer))
	if s.Errors > 0 {
		b += fmt.Sprintf(" ERRORS %d: %s", s.Errors, strings.Join(s.ErrText, " | "))
	}
	return b
}

// fanSample is one fan-out window: n subscribers over one transport.
type fanSample struct {
	Round     int
	Transport string
	N         int
	Notes     int64
	Blocks    int
	CPU       time.Duration // the follower's over the window
	Elapsed   time.Duration
	LoadCPU   time.Duration // this process's over the window
}

func (s fanSample) perNote() time.Duration { return s.CPU / time.Duration(max(s.Notes, 1)) }

func (s fanSample) String() string {
	return fmt.Sprintf("fan-out %-4s n=%-5d %d notifications over %d blocks in %v: follower %v, %s/notification, %s/block; load %s/notification",
		s.Transport, s.N, s.Notes, s.Blocks, s.Elapsed.Round(time.Millisecond), s.CPU.Round(time.Millisecond),
		us(s.perNote()), us(s.CPU/time.Duration(max(s.Blocks, 1))), us(s.LoadCPU/time.Duration(max(s.Notes, 1))))
}

// grpcRun is what every window of a grpc run measures against.
type grpcRun struct {
	cfg      grpcBenchConfig
	bc       *benchCluster
	f        *replica
	grpcAddr string
	posters  map[string]func() poster
}

func grpcBench(ctx context.Context, cfg grpcBenchConfig, stdout, stderr io.Writer) error {
	extra := "grpc_listen: 127.0.0.1:0"
	if p := profileExtra(cfg.Profile); p != "" {
		extra += "\n" + p
	}
	bc, err := startBenchCluster(ctx, clusterOpts{name: "grpc", venn: cfg.Venn, followers: []string{followerID},
		extra: extra, chainExtra: fmt.Sprintf("grpc_id: %d", grpcChainRef),
		upstreamArgs: []string{"-block-time", cfg.BlockTime.String()}}, stderr)
	if err != nil {
		return err
	}
	defer bc.stop()
	f := bc.followers[0]
	addr, err := grpcAddrOf(ctx, bc.l.statsClient, f)
	if err != nil {
		return err
	}
	r := &grpcRun{cfg: cfg, bc: bc, f: f, grpcAddr: addr, posters: map[string]func() poster{
		transportHTTP: rawPosters(f.url),
		transportGRPC: grpcPosters(addr, cfg.StaticWindow, nil),
	}}
	if cfg.SharedConn {
		cc, err := dialGRPC(addr, cfg.StaticWindow)
		if err != nil {
			return err
		}
		defer cc.Close()
		r.posters[transportGRPC] = grpcPosters(addr, cfg.StaticWindow, cc)
	}
	for i := range cfg.Calls {
		if cfg.Calls[i].name == "balance" {
			cfg.Calls[i] = bc.l.balance
			cfg.Calls[i].name = "balance"
		}
	}
	r.cfg = cfg

	env := machineInfo()
	loadBefore := loadAvg()
	var names []string
	for _, c := range cfg.Calls {
		names = append(names, c.name)
	}
	fmt.Fprintf(stderr, "%s; %d rounds × %v (+%v warm-up) × calls %v × conc %v × http, grpc; fan-out %d subscribers × %d blocks; a block every %v\n",
		env, cfg.Rounds, cfg.Duration, cfg.Warmup, names, cfg.Conc, cfg.Subscribers, cfg.SubBlocks, cfg.BlockTime)
	rep := &grpcReport{cfg: cfg}
	for round := 1; round <= cfg.Rounds; round++ {
		order := []string{transportHTTP, transportGRPC}
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, call := range cfg.Calls {
			for _, conc := range cfg.Conc {
				for _, tr := range order {
					s, err := r.measure(ctx, call, tr, conc, round)
					if err != nil {
						return err
					}
					rep.calls = append(rep.calls, s)
					fmt.Fprintf(stderr, "round %d/%d %s\n", round, cfg.Rounds, s)
				}
			}
		}
		if cfg.Subscribers == 0 {
			continue
		}
		fanOrder := []string{transportWS, transportGRPC}
		if round%2 == 0 {
			slices.Reverse(fanOrder)
		}
		if round == 1 {
			fanOrder = append([]string{fanIdle}, fanOrder...)
		}
		for _, tr := range fanOrder {
			s, err := r.fanOut(ctx, tr, round)
			if err != nil {
				return err
			}
			rep.fans = append(rep.fans, s)
			fmt.Fprintf(stderr, "round %d/%d %s\n", round, cfg.Rounds, s)
		}
	}
	return finish(stdout, rep, env, loadBefore)
}

// grpcAddrOf reads the follower's gRPC address from its /readyz.
func grpcAddrOf(ctx context.Context, c *http.Client, f *replica) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(f.metrics, "/metrics")+"/readyz", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("readyz: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		GRPC *struct {
			Addr    string `json:"addr"`
			Serving bool   `json:"serving"`
		} `json:"grpc"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReplyBytes)).Decode(&body); err != nil {
		return "", fmt.Errorf("readyz: %w", err)
	}
	if body.GRPC == nil || body.GRPC.Addr == "" || !body.GRPC.Serving {
		return "", fmt.Errorf("the follower serves no gRPC%s", f.proc.StderrNote())
	}
	return body.GRPC.Addr, nil
}

// measure warms the follower up with call over tr, then measures one
// window.
func (r *grpcRun) measure(ctx context.Context, call callKind, tr string, conc, round int) (grpcSample, error) {
	l := r.bc.l
	if r.cfg.Warmup > 0 {
		l.runWith(ctx, conc, r.cfg.Warmup, call, r.posters[tr])
	}
	type snapshot struct {
		cpu, load time.Duration
		up        stats
		m         metrics
	}
	read := func() (snapshot, error) {
		var s snapshot
		var err error
		if s.cpu, err = cpuOf(r.f.proc); err != nil {
			return s, err
		}
		if s.load, err = cpuTime(os.Getpid()); err != nil {
			return s, err
		}
		if s.up, err = l.upstreamStats(ctx, r.bc.upURL); err != nil {
			return s, err
		}
		s.m, err = scrape(ctx, l.statsClient, r.f.metrics)
		return s, err
	}
	before, err := read()
	if err != nil {
		return grpcSample{}, err
	}
	prof := startProfile(ctx, strings.TrimSuffix(r.f.metrics, "/metrics")+"/admin/debug/pprof/",
		r.profileFile(call.name, tr, conc, round), r.cfg.Duration)
	res := l.runWith(ctx, conc, r.cfg.Duration, call, r.posters[tr])
	after, err := read()
	if err != nil {
		return grpcSample{}, err
	}
	if err := prof(); err != nil {
		return grpcSample{}, err
	}
	if err := ctx.Err(); err != nil {
		return grpcSample{}, err
	}
	if err := r.bc.exited(); err != nil {
		return grpcSample{}, err
	}
	if err := checkLeader(ctx, r.bc.rs, r.bc.replicas()...); err != nil {
		return grpcSample{}, err
	}
	s := grpcSample{Round: round, Call: call.name, Transport: tr, Conc: conc, OK: res.OK, Errors: res.Errors,
		ErrText: res.ErrSample, RPS: float64(res.OK) / res.Elapsed.Seconds(),
		P50: percentile(res.Latencies, 50), P99: percentile(res.Latencies, 99)}
	if n := res.OK + res.Errors; n > 0 {
		s.CPUPer = (after.cpu - before.cpu) / time.Duration(n)
		s.LoadCPUPer = (after.load - before.load) / time.Duration(n)
		s.UpReqPer = float64(after.up.Requests-before.up.Requests) / float64(n)
		s.FromWindow = (after.m.answers("head") - before.m.answers("head")) / float64(n)
	}
	return s, nil
}

// profileFile is where a window's profiles go; "" for none.
func (r *grpcRun) profileFile(call, tr string, conc, round int) string {
	if r.cfg.Profile == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%s.c%d.r%d", r.cfg.Profile, call, tr, conc, round)
}

// fanSub is one subscriber of a fan-out window.
type fanSub interface {
	// next is the number of the next head notified (heartbeats skipped).
	next() (uint64, error)
	close()
}

// wsSub is a WebSocket newHeads subscriber.
type wsSub struct{ c *rawWS }

func (s wsSub) next() (uint64, error) {
	for {
		data, err := s.c.read()
		if err != nil {
			return 0, err
		}
		if n, ok := headNumber(jsonscan.Member(jsonscan.Member(data, "params"), "result")); ok {
			return n, nil
		}
	}
}

func (s wsSub) close() { s.c.close() }

// grpcSub is a NativeSubscribe newHeads stream on a connection of its own.
type grpcSub struct {
	cc     *grpc.ClientConn
	cancel context.CancelFunc
	st     grpc.ServerStreamingClient[pb.NativeSubscribeReplyItem]
}

func (s *grpcSub) next() (uint64, error) {
	for {
		it, err := s.st.Recv()
		if err != nil {
			return 0, err
		}
		if it.GetHeartbeat() {
			continue
		}
		if n, ok := headNumber(it.GetPayload()); ok {
			return n, nil
		}
	}
}

func (s *grpcSub) close() {
	s.cancel()
	_ = s.cc.Close()
}

// headNumber is a newHeads notification's block number.
func headNumber(head []byte) (uint64, bool) {
	v := jsonscan.Member(head, "number")
	if !isQuantity(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v[3:len(v)-1]), 16, 64)
	return n, err == nil
}

func (r *grpcRun) subscribe(ctx context.Context, tr string) (fanSub, error) {
	if tr != transportGRPC {
		c, err := subscribeWS(ctx, "ws"+strings.TrimPrefix(r.f.url, "http"), `["newHeads"]`)
		if err != nil {
			return nil, err
		}
		return wsSub{c}, nil
	}
	cc, err := dialGRPC(r.grpcAddr, r.cfg.StaticWindow)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := pb.NewBlockchainClient(cc).NativeSubscribe(sctx, &pb.NativeSubscribeRequest{Chain: grpcChainRef, Method: "newHeads"})
	if err != nil {
		cancel()
		_ = cc.Close()
		return nil, err
	}
	return &grpcSub{cc: cc, cancel: cancel, st: st}, nil
}

// fanOut holds cfg.Subscribers newHeads subscribers over tr (fanIdle: one
// WebSocket subscriber) and measures the follower's CPU between two
// moments when every subscriber has been sent the same latest head (no
// dispatch under way), sub-blocks or more blocks apart.
func (r *grpcRun) fanOut(ctx context.Context, tr string, round int) (fanSample, error) {
	n := r.cfg.Subscribers
	if tr == fanIdle {
		n = 1
	}
	subs := make([]fanSub, n)
	last := make([]atomic.Uint64, n) // the latest head each has read
	var notes atomic.Int64
	var rg sync.WaitGroup
	var stopping atomic.Bool
	var readErrs atomic.Int64
	defer func() {
		stopping.Store(true)
		for _, s := range subs {
			if s != nil {
				s.close()
			}
		}
		rg.Wait()
	}()
	var g errgroup.Group
	g.SetLimit(subsDialers)
	for i := range n {
		g.Go(func() error {
			s, err := r.subscribe(ctx, tr)
			if err != nil {
				return fmt.Errorf("%s subscriber %d: %w", tr, i, err)
			}
			subs[i] = s
			rg.Go(func() {
				for {
					h, err := s.next()
					if err != nil {
						if !stopping.Load() {
							readErrs.Add(1)
						}
						return
					}
					last[i].Store(h)
					notes.Add(1)
				}
			})
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fanSample{}, err
	}
	// settled waits until every subscriber's latest head is the same one,
	// at least from, and returns it.
	deadline := time.Now().Add(time.Duration(r.cfg.SubBlocks+grpcSubWait) * r.cfg.BlockTime * 2)
	settled := func(from uint64) (uint64, error) {
		for {
			lo, hi := last[0].Load(), last[0].Load()
			for i := range last {
				h := last[i].Load()
				lo, hi = min(lo, h), max(hi, h)
			}
			if lo == hi && lo >= from {
				return lo, nil
			}
			if n := readErrs.Load(); n > 0 {
				return 0, fmt.Errorf("%s fan-out: %d subscribers' streams ended%s", tr, n, r.f.proc.StderrNote())
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%s fan-out: heads %d..%d, not all at %d or above in time", tr, lo, hi, from)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	b0, err := settled(1)
	if err != nil {
		return fanSample{}, err
	}
	cpu0, err := cpuOf(r.f.proc)
	if err != nil {
		return fanSample{}, err
	}
	load0, err := cpuTime(os.Getpid())
	if err != nil {
		return fanSample{}, err
	}
	notes0, t0 := notes.Load(), time.Now()
	prof := startProfile(ctx, strings.TrimSuffix(r.f.metrics, "/metrics")+"/admin/debug/pprof/",
		r.profileFile("fanout", tr, n, round), min(time.Duration(r.cfg.SubBlocks)*r.cfg.BlockTime, maxSubsProfile))
	b1, err := settled(b0 + uint64(r.cfg.SubBlocks))
	if err != nil {
		return fanSample{}, err
	}
	if err := prof(); err != nil {
		return fanSample{}, err
	}
	cpu1, err := cpuOf(r.f.proc)
	if err != nil {
		return fanSample{}, err
	}
	load1, err := cpuTime(os.Getpid())
	if err != nil {
		return fanSample{}, err
	}
	s := fanSample{Round: round, Transport: tr, N: n, Notes: notes.Load() - notes0, Blocks: int(b1 - b0),
		CPU: cpu1 - cpu0, LoadCPU: load1 - load0, Elapsed: time.Since(t0)}
	if want := int64(s.Blocks) * int64(n); s.Notes != want {
		return s, fmt.Errorf("%s fan-out: %d notifications over %d blocks × %d subscribers, want %d", tr, s.Notes, s.Blocks, n, want)
	}
	return s, r.bc.exited()
}

// fanIdle is the fan-out window with one WebSocket subscriber: what the
// follower spends per block with nobody to notify.
const fanIdle = "idle"

// grpcReport prints the call windows' medians per call, transport and
// concurrency with gRPC ÷ HTTP ratios (medians of per-round ratios), then
// the fan-out's.
type grpcReport struct {
	cfg   grpcBenchConfig
	calls []grpcSample
	fans  []fanSample
}

func (r *grpcReport) errors() int {
	n := 0
	for _, s := range r.calls {
		n += s.Errors
	}
	return n
}

func (r *grpcReport) callMedian(call, tr string, conc int, f func(grpcSample) float64) float64 {
	var xs []float64
	for _, s := range r.calls {
		if s.Call == call && s.Transport == tr && s.Conc == conc {
			xs = append(xs, f(s))
		}
	}
	return median(xs)
}

func (r *grpcReport) callRatio(call string, conc int, f func(grpcSample) float64) float64 {
	var xs []float64
	for round := 1; round <= r.cfg.Rounds; round++ {
		var h, g *grpcSample
		for i := range r.calls {
			s := &r.calls[i]
			if s.Call == call && s.Conc == conc && s.Round == round {
				switch s.Transport {
				case transportHTTP:
					h = s
				case transportGRPC:
					g = s
				}
			}
		}
		if h != nil && g != nil && f(*h) > 0 {
			xs = append(xs, f(*g)/f(*h))
		}
	}
	return median(xs)
}

func (r *grpcReport) fanMedian(tr string, f func(fanSample) float64) float64 {
	var xs []float64
	for _, s := range r.fans {
		if s.Transport == tr {
			xs = append(xs, f(s))
		}
	}
	return median(xs)
}

func (r *grpcReport) write(w io.Writer, env string) {
	fmt.Fprintf(w, "# vennbench grpc\n%s\n\n", env)
	conn := "a connection per worker"
	if r.cfg.SharedConn {
		conn = "gRPC workers on one connection"
	}
	if r.cfg.StaticWindow {
		conn += ", gRPC clients with static 1 MiB windows (no BDP pings)"
	}
	if len(r.calls) > 0 {
		fmt.Fprintf(w, "Calls to one follower: medians over %d rounds of %v windows (after %v of warm-up each), %s.\n\n",
			r.cfg.Rounds, r.cfg.Duration, r.cfg.Warmup, conn)
		fmt.Fprintln(w, "| call | transport | conc | req/s | p50 µs | p99 µs | follower CPU µs/call | from window | upstream req/call | load CPU µs/call | errors |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, call := range r.cfg.Calls {
			for _, conc := range r.cfg.Conc {
				for _, tr := range []string{transportHTTP, transportGRPC} {
					errs := 0
					for _, s := range r.calls {
						if s.Call == call.name && s.Transport == tr && s.Conc == conc {
							errs += s.Errors
						}
					}
					m := func(f func(grpcSample) float64) float64 { return r.callMedian(call.name, tr, conc, f) }
					fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.1f | %.1f | %.1f | %.3f | %.2f | %.1f | %d |\n", call.name, tr, conc,
						m(grpcRPS), m(grpcP50), m(grpcP99), m(grpcCPU),
						m(func(s grpcSample) float64 { return s.FromWindow }), m(func(s grpcSample) float64 { return s.UpReqPer }),
						m(func(s grpcSample) float64 { return micros(s.LoadCPUPer) }), errs)
				}
			}
		}
		fmt.Fprintln(w, "\ngRPC ÷ HTTP, medians of per-round ratios:")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| call | conc | req/s | p50 | p99 | follower CPU/call |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, call := range r.cfg.Calls {
			for _, conc := range r.cfg.Conc {
				fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", call.name, conc,
					r.callRatio(call.name, conc, grpcRPS), r.callRatio(call.name, conc, grpcP50),
					r.callRatio(call.name, conc, grpcP99), r.callRatio(call.name, conc, grpcCPU))
			}
		}
		if r.errors() > 0 {
			fmt.Fprintln(w, "\nErrors:")
			for _, s := range r.calls {
				for _, e := range s.ErrText {
					fmt.Fprintf(w, "- %s %s c=%d round %d: %s\n", s.Call, s.Transport, s.Conc, s.Round, strings.TrimSpace(e))
				}
			}
		}
	}
	if len(r.fans) == 0 {
		return
	}
	fmt.Fprintf(w, "\nnewHeads fan-out: %d subscribers per transport, each on a connection of its own; the follower's CPU over %d or more blocks (a block every %v), medians over rounds:\n\n",
		r.cfg.Subscribers, r.cfg.SubBlocks, r.cfg.BlockTime)
	fmt.Fprintln(w, "| transport | subscribers | windows | follower CPU µs/block | follower CPU µs/notification | net of idle µs/notification | load CPU µs/notification |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	perBlock := func(s fanSample) float64 { return micros(s.CPU) / float64(max(s.Blocks, 1)) }
	idle := r.fanMedian(fanIdle, perBlock)
	for _, tr := range []string{fanIdle, transportWS, transportGRPC} {
		k := 0
		n := 0
		for _, s := range r.fans {
			if s.Transport == tr {
				k++
				n = s.N
			}
		}
		if k == 0 {
			continue
		}
		pb := r.fanMedian(tr, perBlock)
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.2f | %.2f | %.2f |\n", tr, n, k, pb,
			r.fanMedian(tr, func(s fanSample) float64 { return micros(s.perNote()) }), (pb-idle)/float64(max(n, 1)),
			r.fanMedian(tr, func(s fanSample) float64 { return micros(s.LoadCPU) / float64(max(s.Notes, 1)) }))
	}
	var xs []float64
	for round := 1; round <= r.cfg.Rounds; round++ {
		var ws, g float64
		for _, s := range r.fans {
			if s.Round == round {
				switch s.Transport {
				case transportWS:
					ws = perBlock(s) - idle
				case transportGRPC:
					g = perBlock(s) - idle
				}
			}
		}
		if ws > 0 && g > 0 {
			xs = append(xs, g/ws)
		}
	}
	fmt.Fprintf(w, "\ngRPC ÷ WebSocket, follower CPU per notification net of idle, median of per-round ratios: %.2f\n", median(xs))
}

func grpcRPS(s grpcSample) float64 { return s.RPS }
func grpcP50(s grpcSample) float64 { return micros(s.P50) }
func grpcP99(s grpcSample) float64 { return micros(s.P99) }
func grpcCPU(s grpcSample) float64 { return micros(s.CPUPer) }
