package remotes

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
)

func TestGetLogsSplitsAddressesWhenOneBlockIsTooMany(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	p := testPool(t, PoolConfig{}, []*fakenode.Node{node}, nil)

	// A block whose two logs come from two contracts.
	var (
		n     uint64
		addrs []string
	)
	for b := uint64(1); b <= 100 && n == 0; b++ {
		res, err := call(t, p, "eth_getLogs", fmt.Sprintf(`[{"fromBlock":"0x%x","toBlock":"0x%x"}]`, b, b))
		if err != nil {
			t.Fatal(err)
		}
		var logs []struct{ Address string }
		if err := json.Unmarshal(res, &logs); err != nil {
			t.Fatal(err)
		}
		if len(logs) == 2 && !strings.EqualFold(logs[0].Address, logs[1].Address) {
			n, addrs = b, []string{logs[1].Address, strings.ToUpper(logs[0].Address[:2]) + logs[0].Address[2:], logs[0].Address}
		}
	}
	if n == 0 {
		t.Fatal("no block with logs from two contracts")
	}
	// The list names the second contract first, the first one twice (once
	// in upper case) and one that has no logs.
	list := `["` + strings.Join(append(addrs, "0x00000000000000000000000000000000000000ff"), `","`) + `"]`
	tests := []struct {
		name string
		give string
	}{
		{"one block", fmt.Sprintf(`[{"fromBlock":"0x%x","toBlock":"0x%x","address":%s}]`, n, n, list)},
		{"a range split down to the block", fmt.Sprintf(`[{"fromBlock":"0x%x","toBlock":"0x%x","address":%s}]`, n, n+3, list)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node.SetMaxLogResults(0)
			want, err := call(t, p, "eth_getLogs", tt.give)
			if err != nil {
				t.Fatal(err)
			}
			node.SetMaxLogResults(1)
			got, err := call(t, p, "eth_getLogs", tt.give)
			if err != nil {
				t.Fatalf("split by address: %v", err)
			}
			// Same logs, same order, byte for byte (other blocks of the range
			// may hold at most one matching log each).
			if string(got) != string(want) {
				t.Fatalf("split answer\n%s\nwant\n%s", got, want)
			}
		})
	}
	t.Run("no address list is the remote's error", func(t *testing.T) {
		node.SetMaxLogResults(1)
		defer node.SetMaxLogResults(0)
		_, err := call(t, p, "eth_getLogs", fmt.Sprintf(`[{"fromBlock":"0x%x","toBlock":"0x%x"}]`, n, n))
		if err == nil || !strings.Contains(err.Error(), "query returned more than 1 results") {
			t.Fatalf("got %v, want the remote's own error", err)
		}
	})
}
