package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald"
	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

const grpcKey = "grpc-key-0123456789abcdef"

// startGRPCApp starts venn from cfg and returns its gRPC server.
func startGRPCApp(t *testing.T, cfg *Config) *emerald.Server {
	g, _ := startGRPCServers(t, cfg)
	return g
}

// startGRPCServers is startGRPCApp with the HTTP servers.
func startGRPCServers(t *testing.T, cfg *Config) (*emerald.Server, *servers) {
	t.Helper()
	var g *emerald.Server
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&g, &s))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	if g == nil || g.Addr() == nil {
		t.Fatal("no gRPC server with grpc_listen set")
	}
	return g, s
}

// dial is a client of g's address; creds nil: plain TCP.
func dial(t *testing.T, g *emerald.Server, creds credentials.TransportCredentials) pb.BlockchainClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient("passthrough:///"+g.Addr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewBlockchainClient(cc)
}

// nativeCall runs req and collects its replies; err is the call's status.
func nativeCall(ctx context.Context, c pb.BlockchainClient, req *pb.NativeCallRequest, opts ...grpc.CallOption) ([]*pb.NativeCallReplyItem, error) {
	st, err := c.NativeCall(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	var out []*pb.NativeCallReplyItem
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

// withKey is a context with the API key in metadata, bounded.
func withKey(t *testing.T, key string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
}

func wantCode(t *testing.T, err error, code codes.Code, inMsg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), inMsg) {
		t.Fatalf("status %v %q, want %v containing %q", st.Code(), st.Message(), code, inMsg)
	}
}

// venn serves Dshackle's NativeCall from geth --dev: each payload is
// geth's result byte for byte, errors go in the item's fields, and bad
// requests end with a clear status.
func TestGRPCNativeCallAgainstGeth(t *testing.T) {
	geth := gethtest.Start(t, gethtest.Options{})
	g, srv := startGRPCServers(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
grpc_listen: 127.0.0.1:0
grpc: {max_recv_bytes: 65536}
shutdown_timeout: 5s
auth:
  keys:
    - {name: app, key: `+grpcKey+`}
chains:
  - name: dev
    chain_id: 1337
    grpc_id: 100
    remotes:
      - {name: geth, url: "`+geth.HTTPURL()+`"}
`))
	c := dial(t, g, nil)
	calls := []struct{ method, params string }{
		{"eth_chainId", `[]`},
		{"eth_getBlockByNumber", `["0x0",true]`},
		{"eth_getBlockByNumber", `["latest",false]`},
		{"eth_getBalance", `["0x0000000000000000000000000000000000000000","latest"]`},
		{"eth_getCode", `["0x0000000000000000000000000000000000000000","latest"]`},
		{"net_version", `[]`},
	}
	req := &pb.NativeCallRequest{Chain: pb.ChainRef_CHAIN_ETHEREUM__MAINNET, Sorted: true}
	for i, cl := range calls {
		req.Items = append(req.Items, &pb.NativeCallItem{Id: uint32(i + 1), Method: cl.method,
			Data: &pb.NativeCallItem_Payload{Payload: []byte(cl.params)}})
	}

	t.Run("payloads byte for byte, in order", func(t *testing.T) {
		got, err := nativeCall(withKey(t, grpcKey), c, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(calls) {
			t.Fatalf("%d replies, want %d", len(got), len(calls))
		}
		for i, cl := range calls {
			want, err := geth.CallJSON(context.Background(), cl.method, cl.params)
			if err != nil {
				t.Fatal(err)
			}
			r := got[i]
			if r.Id != uint32(i+1) || !r.Succeed || !bytes.Equal(r.Payload, want) {
				t.Fatalf("%s: reply %d succeed=%v %q %s\ngeth: %s", cl.method, r.Id, r.Succeed, r.ErrorMessage, r.Payload, want)
			}
		}
	})
	t.Run("gzip and chunks", func(t *testing.T) {
		one := &pb.NativeCallRequest{Chain: req.Chain, ChunkSize: 100, Items: req.Items[1:2]}
		got, err := nativeCall(withKey(t, grpcKey), c, one, grpc.UseCompressor(gzip.Name))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := geth.CallJSON(context.Background(), "eth_getBlockByNumber", `["0x0",true]`)
		var joined []byte
		for i, r := range got {
			if !r.Chunked || r.FinalChunk != (i == len(got)-1) || len(r.Payload) > 100 {
				t.Fatalf("chunk %d: chunked=%v final=%v %d bytes", i, r.Chunked, r.FinalChunk, len(r.Payload))
			}
			joined = append(joined, r.Payload...)
		}
		if len(got) < 2 || !bytes.Equal(joined, want) {
			t.Fatalf("%d chunks joined: %s\ngeth: %s", len(got), joined, want)
		}
	})
	t.Run("errors per item", func(t *testing.T) {
		bad := &pb.NativeCallRequest{Chain: req.Chain, Sorted: true, Items: []*pb.NativeCallItem{
			{Id: 1, Method: "no_such_method", Data: &pb.NativeCallItem_Payload{Payload: []byte(`[]`)}},
			{Id: 2, Method: "eth_chainId", Data: &pb.NativeCallItem_Payload{Payload: []byte(`[1,`)}},
			{Id: 3, Method: "eth_chainId"},
		}}
		got, err := nativeCall(withKey(t, grpcKey), c, bad)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Succeed || got[0].ItemErrorCode != -32601 || got[0].ErrorMessage == "" {
			t.Fatalf("unknown method: %+v", got)
		}
		if got[1].Succeed || got[1].ItemErrorCode != -32700 || !strings.Contains(got[1].ErrorMessage, "payload is not JSON") {
			t.Fatalf("malformed payload: %+v", got[1])
		}
		if !got[2].Succeed || string(got[2].Payload) != `"0x539"` {
			t.Fatalf("no payload (no params): %+v", got[2])
		}
	})
	t.Run("unknown chain", func(t *testing.T) {
		_, err := nativeCall(withKey(t, grpcKey), c, &pb.NativeCallRequest{Chain: pb.ChainRef_CHAIN_BASE__MAINNET, Items: req.Items[:1]})
		wantCode(t, err, codes.Unavailable, "CHAIN_ETHEREUM__MAINNET (100, dev)")
	})
	t.Run("missing and wrong key", func(t *testing.T) {
		_, err := nativeCall(context.Background(), c, req)
		wantCode(t, err, codes.Unauthenticated, "-32056")
		_, err = nativeCall(withKey(t, "not-the-key-0123456789"), c, req)
		wantCode(t, err, codes.Unauthenticated, "-32056")
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+grpcKey)
		if _, err := nativeCall(ctx, c, req); err != nil {
			t.Fatalf("key as a bearer token: %v", err)
		}
	})
	t.Run("oversized message", func(t *testing.T) {
		big := &pb.NativeCallRequest{Chain: req.Chain, Items: []*pb.NativeCallItem{{Id: 1, Method: "eth_chainId",
			Data: &pb.NativeCallItem_Payload{Payload: []byte(`["` + strings.Repeat("a", 70000) + `"]`)}}}}
		_, err := nativeCall(withKey(t, grpcKey), c, big)
		wantCode(t, err, codes.ResourceExhausted, "")
	})
	t.Run("selectors and quorum refused by name", func(t *testing.T) {
		sel := &pb.NativeCallRequest{Chain: req.Chain, Items: req.Items[:1], Selector: &pb.Selector{
			SelectorType: &pb.Selector_LabelSelector{LabelSelector: &pb.LabelSelector{Name: "provider"}}}}
		_, err := nativeCall(withKey(t, grpcKey), c, sel)
		wantCode(t, err, codes.InvalidArgument, "labelSelector")
		_, err = nativeCall(withKey(t, grpcKey), c, &pb.NativeCallRequest{Chain: req.Chain, Items: req.Items[:1], Quorum: 2})
		wantCode(t, err, codes.InvalidArgument, "quorum 2")
	})
	t.Run("a cancelled call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(withKey(t, grpcKey))
		st, err := c.NativeCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		for err == nil {
			_, err = st.Recv()
		}
		wantCode(t, err, codes.Canceled, "")
	})
	t.Run("readyz shows the listener", func(t *testing.T) {
		client := &http.Client{Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		_, body := get(t, client, "http://"+srv.metrics.bound.String()+"/readyz")
		var r readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.GRPC == nil || !r.GRPC.Serving || r.GRPC.Addr != g.Addr().String() {
			t.Fatalf("readyz grpc: %s", body)
		}
	})
	t.Run("describe", func(t *testing.T) {
		d, err := c.Describe(withKey(t, grpcKey), &pb.DescribeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Chains) != 1 {
			t.Fatalf("describe: %v", d)
		}
		ch := d.Chains[0]
		if ch.Chain != pb.ChainRef_CHAIN_ETHEREUM__MAINNET || ch.Status.GetAvailability() != pb.AvailabilityEnum_AVAIL_OK ||
			len(ch.Nodes) != 1 || ch.Nodes[0].Labels[0].Value != "geth" {
			t.Fatalf("describe: %v", ch)
		}
		if !strings.Contains(strings.Join(ch.SupportedMethods, ","), "eth_getBlockByNumber") {
			t.Fatalf("describe methods: %v", ch.SupportedMethods)
		}
	})
}

// The gRPC listener takes the tls section: with client_ca_file a client
// needs a certificate the CA signed.
func TestGRPCMutualTLS(t *testing.T) {
	geth := gethtest.Start(t, gethtest.Options{})
	ct := newCerts(t)
	g := startGRPCApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
grpc_listen: 127.0.0.1:0
shutdown_timeout: 5s
tls: {cert_file: `+ct.serverCert+`, key_file: `+ct.serverKey+`, client_ca_file: `+ct.caFile+`}
chains:
  - name: dev
    chain_id: 1337
    grpc_id: 100
    remotes:
      - {name: geth, url: "`+geth.HTTPURL()+`"}
`))
	req := &pb.NativeCallRequest{Chain: pb.ChainRef_CHAIN_ETHEREUM__MAINNET, Items: []*pb.NativeCallItem{{Id: 1, Method: "eth_chainId"}}}
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	t.Run("client certificate from the CA", func(t *testing.T) {
		c := dial(t, g, credentials.NewTLS(&tls.Config{RootCAs: ct.pool, Certificates: []tls.Certificate{ct.client}}))
		got, err := nativeCall(ctx(), c, req)
		if err != nil || len(got) != 1 || string(got[0].Payload) != `"0x539"` {
			t.Fatalf("with a certificate: %v %v", got, err)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		c := dial(t, g, credentials.NewTLS(&tls.Config{RootCAs: ct.pool}))
		_, err := nativeCall(ctx(), c, req)
		wantCode(t, err, codes.Unavailable, "")
	})
	t.Run("certificate from another CA", func(t *testing.T) {
		c := dial(t, g, credentials.NewTLS(&tls.Config{RootCAs: ct.pool, Certificates: []tls.Certificate{ct.otherClient}}))
		_, err := nativeCall(ctx(), c, req)
		wantCode(t, err, codes.Unavailable, "")
	})
	t.Run("plain TCP", func(t *testing.T) {
		_, err := nativeCall(ctx(), dial(t, g, nil), req)
		wantCode(t, err, codes.Unavailable, "")
	})
}

// grpcurlVersion is the grpcurl release the tests drive, as
// scripts/test.sh builds it.
const grpcurlVersion = "v1.9.3"

// grpcurl is grpcurl's path: $VENN_GRPCURL, else
// ~/.cache/venn-conformance/bin/grpcurl (scripts/test.sh builds it), else
// grpcurl on the PATH. Missing, the test fails under CI and is skipped
// elsewhere.
func grpcurl(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("VENN_GRPCURL"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "venn-conformance", "bin", "grpcurl")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	msg := "grpcurl is missing: run scripts/test.sh (it builds it), or go install github.com/fullstorydev/grpcurl/cmd/grpcurl@" + grpcurlVersion + ", or set VENN_GRPCURL"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// grpcurl, a real client knowing nothing but what reflection tells it,
// lists the service and calls Describe and NativeCall.
func TestGRPCurlThroughReflection(t *testing.T) {
	bin := grpcurl(t)
	geth := gethtest.Start(t, gethtest.Options{})
	g := startGRPCApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
grpc_listen: 127.0.0.1:0
shutdown_timeout: 5s
chains:
  - name: dev
    chain_id: 1337
    grpc_id: 10008
    remotes:
      - {name: geth, url: "`+geth.HTTPURL()+`"}
`))
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	addr := g.Addr().String()
	if out := run(addr, "list"); !strings.Contains(out, "emerald.Blockchain") {
		t.Fatalf("list: %s", out)
	}
	if out := run(addr, "emerald.Blockchain/Describe"); !strings.Contains(out, `"chain": "CHAIN_ETHEREUM__SEPOLIA"`) ||
		!strings.Contains(out, `"availability": "AVAIL_OK"`) {
		t.Fatalf("Describe: %s", out)
	}
	// payload is bytes: base64 in grpcurl's JSON. "W10=" is [], "IjB4NTM5Ig==" "0x539".
	out := run("-d", `{"chain":"CHAIN_ETHEREUM__SEPOLIA","items":[{"id":7,"method":"eth_chainId","payload":"W10="}]}`,
		addr, "emerald.Blockchain/NativeCall")
	if !strings.Contains(out, `"id": 7`) || !strings.Contains(out, `"payload": "IjB4NTM5Ig=="`) {
		t.Fatalf("NativeCall: %s", out)
	}
}

// NativeSubscribe passes the edge as a WebSocket eth_subscribe does: with
// API keys configured, a stream without a valid key ends UNAUTHENTICATED
// before it subscribes, a key whose methods leave out eth_subscribe gets
// the method lists' refusal, and a valid key gets geth's heads.
func TestGRPCNativeSubscribeAPIKeys(t *testing.T) {
	geth := gethtest.Start(t, gethtest.Options{})
	const narrowKey = "grpc-narrow-0123456789abcdef"
	g, srv := startGRPCServers(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
grpc_listen: 127.0.0.1:0
shutdown_timeout: 5s
auth:
  keys:
    - {name: app, key: `+grpcKey+`}
    - {name: narrow, key: `+narrowKey+`, methods: [eth_blockNumber, eth_chainId]}
chains:
  - name: dev
    chain_id: 1337
    grpc_id: 100
    remotes:
      - {name: geth, url: "`+geth.HTTPURL()+`", ws_url: "`+geth.WSURL()+`"}
`))
	c := dial(t, g, nil)
	req := &pb.NativeSubscribeRequest{Chain: pb.ChainRef_CHAIN_ETHEREUM__MAINNET, Method: "newHeads"}
	noKey, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		code codes.Code
		msg  string
	}{
		{"no key", noKey, codes.Unauthenticated, "-32056"},
		{"unknown key", withKey(t, "not-the-key-0123456789"), codes.Unauthenticated, "-32056"},
		{"key without eth_subscribe", withKey(t, narrowKey), codes.PermissionDenied, "eth_subscribe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := c.NativeSubscribe(tt.ctx, req)
			if err == nil {
				_, err = st.Recv()
			}
			wantCode(t, err, tt.code, tt.msg)
		})
	}
	t.Run("valid key", func(t *testing.T) {
		client := &http.Client{Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		metrics := "http://" + srv.metrics.bound.String()
		var accounts []string
		if err := json.Unmarshal(geth.MustCall(t, "eth_accounts"), &accounts); err != nil || len(accounts) == 0 {
			t.Fatalf("geth --dev accounts: %v %v", accounts, err)
		}
		transfer := func() {
			geth.MustCall(t, "eth_sendTransaction", map[string]any{"from": accounts[0], "to": accounts[0], "value": "0x1"})
		}
		// venn tells the heads after the first it learns: one past
		// genesis, before the stream.
		transfer()
		testkit.WaitFor(t, 20*time.Second, "venn's first head", func() bool {
			n, _ := metricValue(t, client, metrics, `venn_chain_head{chain="dev"}`)
			return n >= 1
		})
		st, err := c.NativeSubscribe(withKey(t, grpcKey), req)
		if err != nil {
			t.Fatal(err)
		}
		// The subscription is in venn's subcenter before the block it is
		// to see.
		testkit.WaitFor(t, 20*time.Second, "the stream in venn_subscriptions", func() bool {
			n, _ := metricValue(t, client, metrics, `venn_subscriptions{chain="dev",kind="newHeads"}`)
			return n >= 1
		})
		transfer()
		// geth --dev seals a block for the transaction; the stream tells it
		// as geth has it.
		item := testkit.RecvUntil(t, "with a valid key", st.Recv, func(it *pb.NativeSubscribeReplyItem) bool { return !it.Heartbeat })
		var head, b struct {
			Hash   string `json:"hash"`
			Number string `json:"number"`
		}
		if err := json.Unmarshal(item.Payload, &head); err != nil || head.Hash == "" {
			t.Fatalf("newHeads payload %s: %v", item.Payload, err)
		}
		if err := json.Unmarshal(geth.MustCall(t, "eth_getBlockByNumber", head.Number, false), &b); err != nil || b.Hash != head.Hash {
			t.Fatalf("head %s %s, geth's block there is %s", head.Number, head.Hash, b.Hash)
		}
	})
	// The head and status streams and Describe call no method, but the
	// edge admits their caller as it does a call's: a key is required, and
	// a key's method list does not matter. venn has a head by now, so
	// SubscribeHead sends one at once.
	opens := streamOpens(c)
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			wantCode(t, open(withKey(t, "")), codes.Unauthenticated, "-32056")
			wantCode(t, open(withKey(t, "not-the-key-0123456789")), codes.Unauthenticated, "-32056")
			for _, key := range []string{grpcKey, narrowKey} {
				if err := open(withKey(t, key)); err != nil {
					t.Errorf("with a valid key: %v", err)
				}
			}
		})
	}
}

// streamOpens opens, by name, each stream of c that calls no method
// (SubscribeHead on CHAIN_ETHEREUM__MAINNET, the status streams of every
// chain) and reads its first message, or calls Describe: nil when it is
// served. A stream lives until ctx ends.
func streamOpens(c pb.BlockchainClient) map[string]func(context.Context) error {
	ref := &pb.Chain{Type: pb.ChainRef_CHAIN_ETHEREUM__MAINNET}
	return map[string]func(context.Context) error{
		"SubscribeHead": func(ctx context.Context) error {
			st, err := c.SubscribeHead(ctx, ref)
			if err == nil {
				_, err = st.Recv()
			}
			return err
		},
		"SubscribeStatus": func(ctx context.Context) error {
			st, err := c.SubscribeStatus(ctx, &pb.StatusRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		},
		"SubscribeChainStatus": func(ctx context.Context) error {
			st, err := c.SubscribeChainStatus(ctx, &pb.SubscribeChainStatusRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		},
		"SubscribeNodeStatus": func(ctx context.Context) error {
			st, err := c.SubscribeNodeStatus(ctx, &pb.SubscribeNodeStatusRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		},
		"Describe": func(ctx context.Context) error {
			_, err := c.Describe(ctx, &pb.DescribeRequest{})
			return err
		},
	}
}

// Opening SubscribeHead or a status stream, and a Describe, costs the
// caller one call from its rate limit, the bucket its JSON-RPC calls take
// from: a key over its limit is refused RESOURCE_EXHAUSTED in words that
// name the limit, not the key; a key without one opens as many as it
// likes. Over WebSocket, eth_subscribe is a call and pays as one.
func TestGRPCStreamsTakeFromRateLimits(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: 1, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, n)
	const cappedName, cappedKey = "capped", "capped-key-0123456789abcdef"
	g, srv := startGRPCServers(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
grpc_listen: 127.0.0.1:0
shutdown_timeout: 5s
auth:
  keys:
    - {name: free, key: `+grpcKey+`}
    - {name: `+cappedName+`, key: `+cappedKey+`, rate_limit: {rps: 0.001, burst: 5}}
chains:
  - name: eth
    chain_id: 1
    remotes:
      - {name: a, url: "`+n.URL()+`"}
`))
	c := dial(t, g, nil)
	opens := streamOpens(c)
	if len(opens) != 5 {
		t.Fatalf("%d kinds of opening, the capped key's burst is 5", len(opens))
	}
	// SubscribeHead waits for venn's first head.
	for i := range 3 {
		for name, open := range opens {
			if err := open(withKey(t, grpcKey)); err != nil {
				t.Fatalf("%s %d with a key without a rate limit: %v", name, i, err)
			}
		}
	}
	for name, open := range opens {
		if err := open(withKey(t, cappedKey)); err != nil {
			t.Fatalf("%s within the capped key's burst: %v", name, err)
		}
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			st, _ := status.FromError(open(withKey(t, cappedKey)))
			msg := st.Message()
			if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(msg, "rate limited (JSON-RPC -32055); retry after ") {
				t.Errorf("over the limit: %v %q, want RESOURCE_EXHAUSTED rate limited", st.Code(), msg)
			}
			if strings.Contains(msg, cappedKey) || strings.Contains(msg, cappedName) {
				t.Errorf("the refusal names the key: %q", msg)
			}
		})
	}
	// The opens took from the bucket the key's calls take from.
	_, err := nativeCall(withKey(t, cappedKey), c, &pb.NativeCallRequest{Chain: pb.ChainRef_CHAIN_ETHEREUM__MAINNET,
		Items: []*pb.NativeCallItem{{Id: 1, Method: "eth_chainId"}}})
	wantCode(t, err, codes.ResourceExhausted, "rate limited (JSON-RPC -32055); retry after ")
	ws := dialWS(t, "ws://"+srv.rpc.bound.String()+"/eth", http.Header{"X-Api-Key": {cappedKey}})
	testkit.WSWrite(t, ws, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)
	if got := testkit.WSRead(t, ws); !strings.Contains(got, `"code":-32055`) {
		t.Errorf("eth_subscribe over WebSocket over the limit: %s", got)
	}
	// Another key's bucket is its own.
	for name, open := range opens {
		if err := open(withKey(t, grpcKey)); err != nil {
			t.Errorf("%s with the other key, once the capped one is over: %v", name, err)
		}
	}
}

// describe is what Describe says of each chain, by ChainRef.
func describe(t *testing.T, c pb.BlockchainClient) map[pb.ChainRef]*pb.DescribeChain {
	t.Helper()
	d, err := c.Describe(withKey(t, ""), &pb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[pb.ChainRef]*pb.DescribeChain{}
	for _, ch := range d.Chains {
		out[ch.Chain] = ch
	}
	return out
}

// A real config reload: adding a chain and a remote keeps the open
// streams, and Describe and the status streams see the chain added; once a
// reload removes a chain, its SubscribeHead ends with UNAVAILABLE and the
// status stream sends it as unavailable.
func TestGRPCReloadAddsAndRemovesChains(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	b := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a, b, o)
	const testRef, otherRef = pb.ChainRef_CHAIN_ETHEREUM__SEPOLIA, pb.ChainRef_CHAIN_OPTIMISM__MAINNET
	conf := func(remotes []string, more string) string {
		y := "grpc_listen: 127.0.0.1:0\n" + reloadYAML("warn", remotes, more)
		return strings.Replace(y, "chain_id: 1337\n", "chain_id: 1337\n    grpc_id: 10008\n", 1)
	}
	other := "  - name: other\n    chain_id: 10\n    remotes:\n      - " + remoteYAML("o", o) + "\n"
	app := startReloadApp(t, conf([]string{remoteYAML("a", a)}, ""))
	c := dial(t, app.grpc, nil)
	ctx := withKey(t, "")
	heads, err := c.SubscribeHead(ctx, &pb.Chain{Type: testRef})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.SubscribeStatus(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := heads.Recv()
	if err != nil {
		t.Fatal(err)
	}
	testkit.RecvUntil(t, "first status", st.Recv, func(s *pb.ChainStatus) bool { return s.Chain == testRef })

	rep := app.reload(t, conf([]string{remoteYAML("a", a), remoteYAML("b", b)}, other))
	if !rep.Applied || !slices.Contains(rep.Changes, "chain other added") || !slices.Contains(rep.Changes, "chain test: remote b added") {
		t.Fatalf("report %+v", rep)
	}
	testkit.RecvUntil(t, "SubscribeStatus after the chain was added", st.Recv, func(s *pb.ChainStatus) bool {
		return s.Chain == otherRef && s.Availability == pb.AvailabilityEnum_AVAIL_OK
	})
	d := describe(t, c)
	if len(d) != 2 || d[otherRef] == nil || len(d[testRef].GetNodes()) != 2 {
		t.Fatalf("Describe after the reload: %v", d)
	}
	// The stream on the chain kept goes on, past the reload.
	testkit.RecvUntil(t, "SubscribeHead after the reload", heads.Recv, func(h *pb.ChainHead) bool { return h.Height > first.Height+1 })

	// A reload removes the chain.
	rep = app.reload(t, "grpc_listen: 127.0.0.1:0\nlisten: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\n"+
		"log: {level: warn}\nshutdown_timeout: 5s\nchains:\n"+other)
	if !rep.Applied || !slices.Contains(rep.Changes, "chain test removed (0 WebSocket connections closed)") {
		t.Fatalf("report %+v", rep)
	}
	for {
		if _, err = heads.Recv(); err != nil {
			break
		}
	}
	wantCode(t, err, codes.Unavailable, "no longer served")
	testkit.RecvUntil(t, "SubscribeStatus after the chain was removed", st.Recv, func(s *pb.ChainStatus) bool {
		return s.Chain == testRef && s.Availability == pb.AvailabilityEnum_AVAIL_UNAVAILABLE
	})
	if d := describe(t, c); len(d) != 1 || d[otherRef] == nil {
		t.Fatalf("Describe after the chain was removed: %v", d)
	}
}

// Describe splits the methods venn knows as the edge decides for the
// caller (its key in the metadata): blocked ones, and those off the key's
// allowlist, are excluded; a caller without a valid key may call none.
func TestGRPCDescribeMethodsFollowTheEdge(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: 1})
	const narrowKey = "narrow-key-0123456789abcdef"
	g := startGRPCApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
grpc_listen: 127.0.0.1:0
shutdown_timeout: 5s
methods: {block: [eth_sendRawTransaction], enable: [debug_traceTransaction]}
auth:
  keys:
    - {name: full, key: `+grpcKey+`}
    - {name: narrow, key: `+narrowKey+`, methods: [eth_blockNumber, eth_chainId]}
chains:
  - name: eth
    chain_id: 1
    remotes:
      - {name: a, url: "`+n.URL()+`"}
`))
	c := dial(t, g, nil)
	describeAs := func(key string) *pb.DescribeChain {
		t.Helper()
		d, err := c.Describe(withKey(t, key), &pb.DescribeRequest{})
		if err != nil || len(d.Chains) != 1 {
			t.Fatalf("Describe: %v %v", d, err)
		}
		return d.Chains[0]
	}
	all := len(describeAs(grpcKey).SupportedMethods) + len(describeAs(grpcKey).ExcludedMethods)
	tests := []struct {
		name         string
		key          string
		supported    []string // among supportedMethods
		excluded     []string // among excludedMethods
		supportedLen int      // -1: any
	}{
		{name: "a key held to the methods section", key: grpcKey, supportedLen: -1,
			supported: []string{"eth_blockNumber", "eth_getLogs", "debug_traceTransaction"},
			excluded:  []string{"eth_sendRawTransaction", "debug_traceCall", "debug_getRawBlock"}},
		{name: "a key with an allowlist", key: narrowKey, supportedLen: 2,
			supported: []string{"eth_blockNumber", "eth_chainId"},
			excluded:  []string{"eth_getLogs", "eth_sendRawTransaction", "debug_traceTransaction"}},
	}
	// A caller the edge admits on no chain is refused, as its calls are.
	for _, key := range []string{"", "wrong-key-0123456789abcdef"} {
		_, err := c.Describe(withKey(t, key), &pb.DescribeRequest{})
		wantCode(t, err, codes.Unauthenticated, "-32056")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := describeAs(tt.key)
			for _, m := range tt.supported {
				if !slices.Contains(d.SupportedMethods, m) || slices.Contains(d.ExcludedMethods, m) {
					t.Errorf("%s: not supported", m)
				}
			}
			for _, m := range tt.excluded {
				if !slices.Contains(d.ExcludedMethods, m) || slices.Contains(d.SupportedMethods, m) {
					t.Errorf("%s: not excluded", m)
				}
			}
			if tt.supportedLen >= 0 && len(d.SupportedMethods) != tt.supportedLen {
				t.Errorf("supportedMethods %v, want %d", d.SupportedMethods, tt.supportedLen)
			}
			if got := len(d.SupportedMethods) + len(d.ExcludedMethods); got != all {
				t.Errorf("%d methods in all, want %d", got, all)
			}
		})
	}
}
