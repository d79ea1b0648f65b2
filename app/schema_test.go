package app

import (
	"strings"
	"testing"
)

// An enum value that does not decode names its field and line, every bad
// one is reported at once, and the rest of the file is still validated.
func TestEnumErrorsNameFieldAndLine(t *testing.T) {
	src := `
listen: nonsense
log: {level: loud, format: xml}
chains:
  - name: ethereum
    chain_id: 1
    remotes:
      - name: a
        url: http://127.0.0.1:1
        tier: gold
      - {name: b, url: "http://127.0.0.1:2"}
    consensus:
      - methods: [eth_call]
        on_dispute: vote
        trusted_tier: silver
`
	_, err := Parse([]byte(src))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	want := []string{
		`listen: must be host:port`,
		`log.level (line 3): must be debug, info, warn or error, not "loud"`,
		`log.format (line 3): must be text or json, not "xml"`,
		`chains[0].remotes[0].tier (line 10): unknown tier "gold" (want primary, secondary or fallback)`,
		`chains[0].consensus[0].on_dispute (line 14): unknown dispute policy "vote" (want error, most_common or prefer_tier)`,
		`chains[0].consensus[0].trusted_tier (line 15): unknown tier "silver" (want primary, secondary or fallback)`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in\n%v", w, err)
		}
	}
	if n := len(strings.Split(err.Error(), "\n")); n != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", n, len(want), err)
	}
}

// Good enum values decode into the packages' own types.
func TestEnumValuesDecode(t *testing.T) {
	c := mustParse(t, threeRemotes+`    consensus: [{methods: [eth_call], on_dispute: prefer_tier, trusted_tier: secondary}]
`)
	if got := c.Chains[0].Remotes[1].Tier.String(); got != "secondary" {
		t.Errorf("tier = %q, want secondary", got)
	}
	r := c.Chains[0].Pool.Consensus[0]
	if r.OnDispute.String() != "prefer_tier" || r.TrustedTier.String() != "secondary" {
		t.Errorf("rule = %+v", r)
	}
}

// The decoder's messages name every section in the file's words, derived
// from the config types: no struct is left with its Go name.
func TestTypeWordsCoverEverySection(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "    head: {win: 1}\n", want: "chains[0].head.win (line 8): field win not found in head"},
		{give: "    integrity: {x: 1}\n", want: "chains[0].integrity.x (line 8): field x not found in integrity"},
		{give: "    consensus: 3\n", want: "cannot unmarshal !!int `3` into a list of consensus rules"},
		{give: "    hedge: {groups: [{m: 1}]}\n", want: "field m not found in a hedge group"},
		{give: "        rate_limit: {rpss: 1}\n", want: "field rpss not found in rate_limit"},
		{give: "        timeout: soon\n", want: "cannot unmarshal !!str `soon` into a duration (like 10s)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Parse([]byte(minimal + tt.give))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "Config") {
				t.Errorf("a Go type name reached the message: %v", err)
			}
		})
	}
}

func TestCamelWords(t *testing.T) {
	tests := []struct{ give, want string }{
		{give: "HedgeGroup", want: "hedge group"},
		{give: "APIKey", want: "api key"},
		{give: "ConsensusRule", want: "consensus rule"},
		{give: "CORS", want: "cors"},
		{give: "", want: ""},
	}
	for _, tt := range tests {
		if got := camelWords(tt.give); got != tt.want {
			t.Errorf("camelWords(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
