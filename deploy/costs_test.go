package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/app"
)

// TestCostTablesLoad pastes each shipped cost table under a remote as its
// budget, as the files say to, and holds it to venn's own parser: known
// fields only, valid prices, and the prices the file writes.
func TestCostTablesLoad(t *testing.T) {
	files, err := filepath.Glob("costs/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("cost tables: %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString("chains:\n  - name: ethereum\n    chain_id: 1\n    remotes:\n      - name: paid\n        url: http://127.0.0.1:18545\n        budget:\n")
			for line := range strings.Lines(string(data)) {
				b.WriteString("          " + line)
			}
			c, err := app.Parse([]byte(b.String()))
			if err != nil {
				t.Fatalf("%s does not load as a budget: %v", f, err)
			}
			bud := c.Chains[0].Remotes[0].Budget
			if !bud.Set() || bud.Per.String() == "" {
				t.Fatalf("%s: no budget read: %+v", f, bud)
			}
			if bud.Units > 0 && (bud.Cost["eth_getLogs"] == 0 || bud.Cost["default"] == 0) {
				t.Fatalf("%s: eth_getLogs and default must be priced: %v", f, bud.Cost)
			}
		})
	}
}
