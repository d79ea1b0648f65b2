package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// viem and ethers v6 read through venn with compressed answers what they
// read through venn without: blocks with their transactions, receipts,
// logs, balances, code and eth_getBlockReceipts. A proxy between client
// and venn counts each answer's Content-Encoding on the wire, so the test
// fails if the answers went uncompressed. Node's fetch and ethers ask for
// gzip only (no zstd): venn, offering zstd first, must answer them gzip.
func TestJSClientsWithCompressedAnswers(t *testing.T) {
	for _, c := range []struct{ dir, pkg string }{{viemDir, "viem"}, {ethersDir, "ethers"}} {
		t.Run(c.pkg, func(t *testing.T) { compressedJS(t, c.dir, c.pkg) })
	}
}

const compressedScript = "compressed.mjs"

func compressedJS(t *testing.T, dir, pkg string) {
	proj := nodeProject(t, dir, pkg, compressedScript)
	g := gethtest.Start(t, gethtest.Options{})
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	dev := accounts[0]
	var deploy string
	mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", map[string]any{"from": dev, "data": pingCode()}), &deploy)
	contract := waitReceipt(t, g, deploy).ContractAddress
	var tx string
	var block uint64
	for i := range 3 {
		mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction",
			map[string]any{"from": dev, "to": contract, "data": gethtest.Topic(uint64(7 + i))}), &tx)
		block = quantity(t, waitReceipt(t, g, tx).BlockNumber)
	}

	on := startVenn(t, []*gethtest.Geth{g}, vennOptions{top: "compression: {replies: true, encodings: [zstd, gzip], min_bytes: 1}"})
	off := startVenn(t, []*gethtest.Geth{g}, vennOptions{})
	waitVennHead(t, on, block)
	waitVennHead(t, off, block)
	onWire, offWire := encodingCounter(t, on.URL(chainName)), encodingCounter(t, off.URL(chainName))

	ctx, cancel := context.WithTimeout(context.Background(), viemRunTimeout)
	defer cancel()
	urls, _ := json.Marshal([]string{onWire.url, offWire.url})
	var stdout bytes.Buffer
	stderr := &testkit.Buffer{}
	cmd := exec.CommandContext(ctx, "node", compressedScript)
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "URLS="+string(urls), "BLOCK="+strconv.FormatUint(block, 10), "TX="+tx,
		"ADDR="+dev, "CONTRACT="+contract, "CHAIN_ID=1337")
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s/%s: %v; stderr:\n%s", pkg, compressedScript, err, stderr.String())
	}
	var got []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got) != 2 {
		t.Fatalf("node %s/%s printed %q: %v", pkg, compressedScript, truncate(stdout.String()), err)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		a, _ := json.Marshal(got[0])
		b, _ := json.Marshal(got[1])
		t.Errorf("%s read differently with compressed answers:\n on: %s\noff: %s", pkg, truncate(string(a)), truncate(string(b)))
	}
	logs, _ := got[0]["logs"].([]any)
	receipts, _ := got[0]["receipts"].([]any)
	if len(logs) != 3 || len(receipts) != 1 || got[0]["receipt"] == nil {
		t.Errorf("%s read %d logs, %d block receipts, receipt %v; want 3, 1 and one", pkg, len(logs), len(receipts), got[0]["receipt"] != nil)
	}
	onCounts, offCounts := onWire.counts(), offWire.counts()
	t.Logf("%s: answers by Content-Encoding, compression on %v, off %v; Accept-Encoding %q", pkg, onCounts, offCounts, onWire.accept())
	if onCounts["gzip"] == 0 || onCounts["zstd"] != 0 || onCounts[""] != 0 {
		t.Errorf("%s with compression on: answers by encoding %v, want every one gzip", pkg, onCounts)
	}
	if len(offCounts) != 1 || offCounts[""] == 0 {
		t.Errorf("%s with compression off: answers by encoding %v, want none encoded", pkg, offCounts)
	}
}

// wireCounter is a reverse proxy to one venn chain URL that passes the
// client's Accept-Encoding and venn's answer through as they are, and
// counts the answers by Content-Encoding.
type wireCounter struct {
	url       string
	mu        sync.Mutex
	byEnc     map[string]int
	acceptEnc string
}

func encodingCounter(t *testing.T, target string) *wireCounter {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	w := &wireCounter{byEnc: map[string]int{}}
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.URL.Path = u.Path
			w.mu.Lock()
			w.acceptEnc = r.In.Header.Get("Accept-Encoding")
			w.mu.Unlock()
		},
		// An explicit Accept-Encoding (the client's) turns off the
		// transport's own gzip: the body passes through as venn sent it.
		Transport: &http.Transport{DisableCompression: true},
		ModifyResponse: func(resp *http.Response) error {
			w.mu.Lock()
			w.byEnc[strings.ToLower(resp.Header.Get("Content-Encoding"))]++
			w.mu.Unlock()
			return nil
		},
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *wireCounter) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.byEnc))
	for k, v := range w.byEnc {
		out[k] = v
	}
	return out
}

func (w *wireCounter) accept() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acceptEnc
}
