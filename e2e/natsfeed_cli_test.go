package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/natstest"
)

// cliFeed reads the chain's stream with the nats CLI, as an operator
// would: block head's event by its subject (stream get --last-for), and
// every event through a pull consumer (consumer next), applied in order.
// It returns the head hash that gives, and block head's hash.
func cliFeed(t *testing.T, ns *natstest.Server, head uint64) (applied, last string) {
	t.Helper()
	cli := natstest.CLI(t)
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append([]string{"--server", ns.URL()}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	var got struct {
		Data []byte `json:"data"`
	}
	if err := json.Unmarshal(run("stream", "get", "VENN_DEV", "--last-for", "venn.dev.events.block."+strconv.FormatUint(head, 10), "--json"), &got); err != nil {
		t.Fatal(err)
	}
	var blk struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(got.Data, &blk); err != nil {
		t.Fatal(err)
	}

	var info struct {
		State struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
	}
	if err := json.Unmarshal(run("stream", "info", "VENN_DEV", "--json"), &info); err != nil {
		t.Fatal(err)
	}
	run("consumer", "add", "VENN_DEV", "cli", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
	out := run("consumer", "next", "VENN_DEV", "cli", "--raw", "--count", strconv.FormatUint(info.State.Msgs, 10))
	chain := map[uint64]string{}
	var top uint64
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if uint64(len(lines)) != info.State.Msgs {
		t.Fatalf("nats consumer next gave %d events, the stream holds %d", len(lines), info.State.Msgs)
	}
	for _, line := range lines {
		var ev struct {
			Type   string `json:"type"`
			Number uint64 `json:"number"`
			Hash   string `json:"hash"`
			Common *struct {
				Number uint64 `json:"number"`
			} `json:"common"`
			To     uint64 `json:"to"`
			ToHash string `json:"to_hash"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		switch ev.Type {
		case "block":
			chain[ev.Number], top = ev.Hash, ev.Number
		case "reorg":
			for n := range chain {
				if n > ev.Common.Number {
					delete(chain, n)
				}
			}
			top = ev.Common.Number
		case "gap":
			chain[ev.To], top = ev.ToHash, ev.To
		}
	}
	return chain[top], blk.Hash
}
