package app

import (
	"context"
	"io"
	"math/big"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// countUncompressed counts the answers Go's transport received gzipped and
// decoded itself (Response.Uncompressed).
type countUncompressed struct {
	rt  http.RoundTripper
	n   atomic.Int64
	all atomic.Int64
}

func (c *countUncompressed) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil {
		c.all.Add(1)
		if resp.Uncompressed {
			c.n.Add(1)
		}
	}
	return resp, err
}

// TestEthclientWithCompression: go-ethereum's ethclient through venn with
// compressed answers gets what it gets from the node itself.
func TestEthclientWithCompression(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{})
	s := startApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
shutdown_timeout: 5s
compression: {replies: true, min_bytes: 1}
chains:
  - name: test
    chain_id: 1337
    remotes:
      - {name: node, url: "`+node.URL()+`"}
`))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	counter := &countUncompressed{rt: http.DefaultTransport}
	rc, err := rpc.DialOptions(ctx, "http://"+s.rpc.bound.String()+"/test", rpc.WithHTTPClient(&http.Client{Transport: counter}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	viaVenn := ethclient.NewClient(rc)
	direct, err := ethclient.DialContext(ctx, node.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	for _, n := range []int64{1, 42, 99} {
		want, err := direct.BlockByNumber(ctx, big.NewInt(n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := viaVenn.BlockByNumber(ctx, big.NewInt(n))
		if err != nil {
			t.Fatalf("block %d through venn: %v", n, err)
		}
		if got.Hash() != want.Hash() || len(got.Transactions()) != len(want.Transactions()) {
			t.Errorf("block %d: %s with %d txs, want %s with %d", n, got.Hash(), len(got.Transactions()), want.Hash(), len(want.Transactions()))
		}
		wantR, err := direct.BlockReceipts(ctx, rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(n)))
		if err != nil {
			t.Fatal(err)
		}
		gotR, err := viaVenn.BlockReceipts(ctx, rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(n)))
		if err != nil {
			t.Fatalf("receipts %d through venn: %v", n, err)
		}
		if !reflect.DeepEqual(gotR, wantR) {
			t.Errorf("block %d: receipts through venn differ from the node's", n)
		}
	}
	addr := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	want, err := direct.BalanceAt(ctx, addr, big.NewInt(50))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := viaVenn.BalanceAt(ctx, addr, big.NewInt(50)); err != nil || got.Cmp(want) != 0 {
		t.Errorf("balance through venn %v, %v; want %v", got, err, want)
	}
	if counter.n.Load() == 0 || counter.n.Load() != counter.all.Load() {
		t.Errorf("%d of %d answers came gzipped, want all (min_bytes 1)", counter.n.Load(), counter.all.Load())
	}

	// A client that asks for nothing gets plain JSON.
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Post(
		"http://"+s.rpc.bound.String()+"/test", "application/json", strings.NewReader(chainIDCall))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "" || string(b) != `{"jsonrpc":"2.0","id":1,"result":"0x539"}` {
		t.Errorf("without Accept-Encoding: %q %s", resp.Header.Get("Content-Encoding"), b)
	}
}
