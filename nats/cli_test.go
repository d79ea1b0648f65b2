package nats

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/natstest"
	"github.com/venn-gateway/venn/jrpc"
)

// The nats CLI, a client venn's code had no part in, gets over NATS the
// bytes HTTP answers: a call, and a batch with a failing item.
func TestNATSCLIRequest(t *testing.T) {
	cli := natstest.CLI(t)
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	r := startReplica(t, ns, newHandler(), jrpc.Limits{}, Config{})
	tests := []struct {
		name string
		give string
	}{
		{name: "call", give: `{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}`},
		{name: "batch", give: `[{"jsonrpc":"2.0","id":1,"method":"test_echo","params":["a"]},{"jsonrpc":"2.0","id":2,"method":"test_fail"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, cli, "--server", ns.URL(), "--timeout", "10s",
				"request", "--raw", "venn."+testChain+".rpc", tt.give)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("nats request: %v\n%s", err, stderr.Bytes())
			}
			want := r.post(t, []byte(tt.give))
			// The CLI ends what it prints with newlines; a JSON-RPC answer
			// never ends with one.
			if got := bytes.TrimRight(out, "\n"); !bytes.Equal(got, want) {
				t.Fatalf("nats CLI got:\n%s\nHTTP answers:\n%s", got, want)
			}
		})
	}
}
