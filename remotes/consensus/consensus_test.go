package consensus

import (
	"encoding/json"
	"strings"
	"testing"
)

// tier is a pool's tier type, as remotes.Tier: primary, secondary, fallback.
type tier uint8

const fallback tier = 2

func TestCanonical(t *testing.T) {
	tests := []struct {
		name   string
		give   string
		ignore []string
		want   string
	}{
		{name: "keys sorted, spaces gone", give: `{"b":1, "a":{"d":2,"c":3}}`, want: `{"a":{"c":3,"d":2},"b":1}`},
		{name: "numbers keep their text", give: `[1.0, 123456789012345678901234567890]`, want: `[1.0,123456789012345678901234567890]`},
		{name: "null", give: `null`, want: `null`},
		{name: "a name at any depth", give: `{"size":"0x1","txs":[{"size":"0x2","h":"0x3"}]}`, ignore: []string{"size"},
			want: `{"txs":[{"h":"0x3"}]}`},
		{name: "a path from the root, through arrays", give: `{"size":"0x1","txs":[{"size":"0x2","h":"0x3"}]}`, ignore: []string{"txs.size"},
			want: `{"size":"0x1","txs":[{"h":"0x3"}]}`},
		{name: "a path on an array result", give: `[{"removed":false,"a":1},{"removed":true,"a":2}]`, ignore: []string{"removed"},
			want: `[{"a":1},{"a":2}]`},
		{name: "a wildcard segment", give: `{"x":{"v":1,"w":2},"y":{"v":3}}`, ignore: []string{"*.v"},
			want: `{"x":{"w":2},"y":{}}`},
		{name: "a path that does not match", give: `{"a":{"b":1}}`, ignore: []string{"a.c", "b.a"}, want: `{"a":{"b":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ig, err := CompileIgnore(tt.ignore)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonical(json.RawMessage(tt.give), ig)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := Canonical(json.RawMessage(`{"a":1} {"b":2}`), nil); err == nil {
		t.Fatal("trailing data accepted")
	}
}

func TestCompileRules(t *testing.T) {
	m := []string{"eth_getBlockByNumber"}
	tests := []struct {
		name      string
		give      []Rule[tier]
		remotes   int
		wantErr   string
		wantN     int
		wantAgree int
	}{
		{name: "defaults", give: []Rule[tier]{{Methods: m}}, remotes: 5, wantN: 3, wantAgree: 2},
		{name: "defaults on two remotes", give: []Rule[tier]{{Methods: m}}, remotes: 2, wantN: 2, wantAgree: 2},
		{name: "one remote", give: []Rule[tier]{{Methods: m}}, remotes: 1, wantErr: "at least 2"},
		{name: "more remotes than the chain", give: []Rule[tier]{{Methods: m, Remotes: 4}}, remotes: 3, wantErr: "the chain has 3"},
		{name: "not a majority", give: []Rule[tier]{{Methods: m, Remotes: 4, Agree: 2}}, remotes: 4, wantErr: "majority"},
		{name: "agree above remotes", give: []Rule[tier]{{Methods: m, Remotes: 3, Agree: 4}}, remotes: 4, wantErr: "majority"},
		{name: "no methods", give: []Rule[tier]{{}}, remotes: 3, wantErr: "at least one method"},
		{name: "a prefix", give: []Rule[tier]{{Methods: []string{"eth_*"}}}, remotes: 3, wantErr: "exact"},
		{name: "a write", give: []Rule[tier]{{Methods: []string{"eth_sendRawTransaction"}}}, remotes: 3, wantErr: "write"},
		{name: "stateful", give: []Rule[tier]{{Methods: []string{"eth_getFilterChanges"}}}, remotes: 3, wantErr: "stateful"},
		{name: "a method twice", give: []Rule[tier]{{Methods: m}, {Methods: m}}, remotes: 3, wantErr: "already voted on"},
		{name: "an empty path segment", give: []Rule[tier]{{Methods: m, IgnoreFields: []string{"a..b"}}}, remotes: 3, wantErr: "ignore_fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compile(tt.give, tt.remotes, fallback)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := got[m[0]]
			if r.Remotes != tt.wantN || r.Agree != tt.wantAgree {
				t.Fatalf("remotes %d agree %d, want %d and %d", r.Remotes, r.Agree, tt.wantN, tt.wantAgree)
			}
		})
	}
}

func TestMostCommon(t *testing.T) {
	// The voters are their tiers: p primary, s secondary, f fallback.
	p, s, f := 0, 1, 2
	ans := func(key byte, null bool, voters ...int) *Answer[int] {
		return &Answer[int]{raws: []Hash{{key}}, Null: null, Voters: voters}
	}
	all := func(v int) (int, bool) { return v, true }
	primaryOnly := func(v int) (int, bool) { return v, v == p }
	tests := []struct {
		name  string
		give  []*Answer[int]
		trust func(int) (int, bool)
		want  byte // key of the winner; 0 none
	}{
		{name: "most votes", give: []*Answer[int]{ans(1, false, s), ans(2, false, s, f)}, trust: all, want: 2},
		{name: "tie: data over null", give: []*Answer[int]{ans(1, true, p), ans(2, false, f)}, trust: all, want: 2},
		{name: "tie: better tier", give: []*Answer[int]{ans(1, false, f), ans(2, false, s)}, trust: all, want: 2},
		{name: "tie all the way", give: []*Answer[int]{ans(1, false, s), ans(2, false, s)}, trust: all, want: 0},
		{name: "trusted tier beats a majority", give: []*Answer[int]{ans(1, false, s, f), ans(2, false, p)}, trust: primaryOnly, want: 2},
		{name: "no trusted voter", give: []*Answer[int]{ans(1, false, s, f)}, trust: primaryOnly, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := Tally[int]{Answers: tt.give}
			got := tl.MostCommon(tt.trust)
			switch {
			case got == nil && tt.want != 0:
				t.Fatalf("no winner, want %d", tt.want)
			case got != nil && got.raws[0][0] != tt.want:
				t.Fatalf("winner %d, want %d", got.raws[0][0], tt.want)
			}
		})
	}
}

func TestDisputePolicyText(t *testing.T) {
	for _, d := range []DisputePolicy{DisputeError, DisputeMostCommon, DisputePreferTier} {
		b, _ := d.MarshalText()
		var got DisputePolicy
		if err := got.UnmarshalText(b); err != nil || got != d {
			t.Errorf("%s: round trip = %v, %v", d, got, err)
		}
	}
	var got DisputePolicy
	if err := got.UnmarshalText([]byte("vote")); err == nil {
		t.Error("vote decodes")
	}
}
