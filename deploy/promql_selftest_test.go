package deploy

import (
	"slices"
	"testing"
)

// The reader of selector names sees what PromQL selects and nothing else.
func TestSelectorNames(t *testing.T) {
	tests := []struct {
		give    string
		want    []string
		wantErr bool
	}{
		{give: `up`, want: []string{"up"}},
		{give: `sum by (chain, instance) (venn_remote_healthy) == 0`, want: []string{"venn_remote_healthy"}},
		{give: `histogram_quantile(0.99, sum by (le) (rate(venn_x_bucket{chain=~"$chain", a="b}c"}[5m])))`, want: []string{"venn_x_bucket"}},
		{give: `a > 10 * b and a > 30`, want: []string{"a", "b", "a"}},
		{give: `(max by (chain) (h) - max by (chain) (ar)) * on (chain) group_left (x) max by (chain) (bt) > 1800`, want: []string{"h", "ar", "bt"}},
		{give: "sum without (le) (rate(m[5m] offset 1h)) / ignoring (code) n unless bool o", want: []string{"m", "n", "o"}},
		{give: `count_values("v", m)`, want: []string{"m"}},
		{give: `m{a='x\'y'}`, want: []string{"m"}},
		{give: `1.5e3 + 2`, want: nil},
		{give: `{__name__="m"}`, wantErr: true},
		{give: `m{a="b"`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := selectorNames(tt.give)
		if (err != nil) != tt.wantErr {
			t.Errorf("selectorNames(%q) error %v, want error %v", tt.give, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !slices.Equal(got, tt.want) {
			t.Errorf("selectorNames(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}
