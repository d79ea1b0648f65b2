package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// runCode runs venn with args and wants exit code want.
func runCode(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut); code != want {
		t.Fatalf("venn %s: exit code %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, &out, &errOut)
	}
	return out.String(), errOut.String()
}

// storedHash is the hash of the stored block n ("" when none).
func storedHash(t *testing.T, url string, n uint64) string {
	t.Helper()
	res, ok, err := openHistory(t, url).Answer(context.Background(), evm.ParseCall("eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`)))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	var b struct{ Hash string }
	if err := json.Unmarshal(res, &b); err != nil {
		t.Fatal(err)
	}
	return b.Hash
}

// venn history verify finds the blocks of another chain in the store (here
// stored by a backfill through a remote that lies about its chain id, as a
// remote that switched chains wrote them through before), and --purge
// removes them, their transactions and logs, and their coverage, leaving
// the chain's own blocks. Before, there was no way to find them.
func TestHistoryVerify(t *testing.T) {
	url := pgtest.Empty(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 200})
	liar := fakenode.Start(t, fakenode.Options{ChainID: 5, Head: 200})
	liar.SetChainID(testChainID)
	cfg := historyConfig(t, url, node)
	runCode(t, exitOK, "backfill", "--config", cfg, "--chain", "test", "--from", "0", "--to", "50")
	runCode(t, exitOK, "backfill", "--config", cfg, "--chain", "test", "--from", "80", "--to", "120")
	runCode(t, exitOK, "backfill", "--config", historyConfig(t, url, liar), "--chain", "test", "--from", "60", "--to", "70")
	hist := openHistory(t, url)
	if got, want := covered(t, hist), "[{0 50} {60 70} {80 120}]"; got != want {
		t.Fatalf("covered %s, want %s", got, want)
	}
	if storedHash(t, url, 65) != liar.BlockHash(65) {
		t.Fatal("the foreign block was not planted")
	}

	verify := []string{"history", "verify", "--config", cfg, "--chain", "test", "--from", "0", "--to", "150"}
	out, errOut := runCode(t, exitError, verify...)
	for _, want := range []string{
		"verified test 0..150: 103 stored blocks, 92 of the remotes' chain, 11 foreign, 0 unchecked, 0 broken links",
		"foreign (another chain's hash at the number): 60..70\n",
		"run again with --purge",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout %q, want %q", out, want)
		}
	}
	if !strings.Contains(errOut, "verify 151/151 blocks (100.0%)") {
		t.Errorf("stderr %q: no final progress line", errOut)
	}
	if got := covered(t, hist); got != "[{0 50} {60 70} {80 120}]" {
		t.Fatalf("verify without --purge changed the store: covered %s", got)
	}

	out, _ = runCode(t, exitOK, append(verify, "--purge")...)
	if want := "purged 11 foreign blocks (22 transactions, 22 logs); no longer covered: 60..70\n"; !strings.Contains(out, want) {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if got, want := covered(t, hist), "[{0 50} {80 120}]"; got != want {
		t.Errorf("covered %s after the purge, want %s", got, want)
	}
	for _, n := range []uint64{0, 50, 80, 120} {
		if got := storedHash(t, url, n); got != node.BlockHash(n) {
			t.Errorf("block %d stored as %q after the purge, want the chain's %s", n, got, node.BlockHash(n))
		}
	}
	if got := storedHash(t, url, 65); got != "" {
		t.Errorf("foreign block 65 still stored: %s", got)
	}
	out, _ = runCode(t, exitOK, verify...)
	if !strings.Contains(out, "92 stored blocks, 92 of the remotes' chain, 0 foreign") {
		t.Errorf("after the purge: %q", out)
	}
	// The purged numbers take the chain's own blocks again.
	runCode(t, exitOK, "backfill", "--config", cfg, "--chain", "test", "--from", "51", "--to", "79")
	if got := covered(t, hist); got != "[{0 120}]" {
		t.Errorf("covered %s after the backfill", got)
	}

	// A stored block whose parent is not the stored block below it is
	// reported, and left: its hash is the chain's.
	pgtest.Exec(t, url, `UPDATE blocks SET parent = $1 WHERE number = 90`, make([]byte, 32))
	out, _ = runCode(t, exitError, append(verify, "--purge")...)
	if !strings.Contains(out, "0 foreign, 0 unchecked, 1 broken links") || !strings.Contains(out, "stored block below it): 90\n") {
		t.Errorf("stdout %q: want block 90's broken link", out)
	}
	if got := storedHash(t, url, 90); got != node.BlockHash(90) {
		t.Errorf("block 90 purged for a broken link")
	}
}

func TestHistoryUsage(t *testing.T) {
	tests := []struct {
		give       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"history"}, exitUsage, "usage: venn history verify"},
		{[]string{"history", "check"}, exitUsage, `unknown command "check"`},
		{[]string{"history", "verify", "--config", "x.yaml", "--to", "5"}, exitUsage, "--chain is required"},
		{[]string{"history", "verify", "--config", "x.yaml", "--chain", "c"}, exitUsage, "--to is required"},
		{[]string{"history", "verify", "--config", "x.yaml", "--chain", "c", "--from", "9", "--to", "5"}, exitUsage, "--from 9 is above --to 5"},
		{[]string{"history", "verify", "--chain", "c", "--to", "5"}, exitUsage, "--config is required"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if got := run(tt.give, &stdout, &stderr); got != tt.wantCode || !strings.Contains(stderr.String(), tt.wantStderr) {
			t.Errorf("venn %v: code %d, stderr %q; want %d and %q", tt.give, got, &stderr, tt.wantCode, tt.wantStderr)
		}
	}
}
