package app

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/consensus"
)

// threeRemotes is a chain of three remotes, for vote rules.
const threeRemotes = `
chains:
  - name: ethereum
    chain_id: 1
    remotes:
      - {name: a, url: "http://127.0.0.1:1"}
      - {name: b, url: "http://127.0.0.1:2", tier: secondary}
      - {name: c, url: "http://127.0.0.1:3"}
`

func TestConsensusConfig(t *testing.T) {
	tests := []struct {
		name       string
		give       string
		want       []remotes.ConsensusRule
		wantCordon [3]any // strikes, within, period
		wantLog    string
	}{
		{name: "off unless configured", give: threeRemotes,
			wantCordon: [3]any{remotes.DefaultCordonStrikes, remotes.DefaultCordonWithin, remotes.DefaultCordonPeriod}},
		{name: "defaults of a rule", give: threeRemotes + `    consensus: [{methods: [eth_getBlockByNumber]}]
`,
			want: []remotes.ConsensusRule{{Methods: []string{"eth_getBlockByNumber"}, Remotes: 3, Agree: 2,
				OnDispute: consensus.DisputeError, TrustedTier: remotes.TierPrimary}},
			wantCordon: [3]any{remotes.DefaultCordonStrikes, remotes.DefaultCordonWithin, remotes.DefaultCordonPeriod}},
		{name: "everything set", give: threeRemotes + `    consensus:
      - methods: [eth_getBlockByNumber, eth_getLogs]
        remotes: 3
        agree: 3
        ignore_fields: [size, transactions.v]
        on_dispute: prefer_tier
        trusted_tier: secondary
      - {methods: [eth_getTransactionReceipt], remotes: 2, on_dispute: most_common}
    cordon: {strikes: 5, within: 30s, period: 1m}
    misbehaviour_log: /var/log/venn/misbehaviour.jsonl
`,
			want: []remotes.ConsensusRule{
				{Methods: []string{"eth_getBlockByNumber", "eth_getLogs"}, Remotes: 3, Agree: 3,
					IgnoreFields: []string{"size", "transactions.v"}, OnDispute: consensus.DisputePreferTier, TrustedTier: remotes.TierSecondary},
				{Methods: []string{"eth_getTransactionReceipt"}, Remotes: 2, Agree: 2,
					OnDispute: consensus.DisputeMostCommon, TrustedTier: remotes.TierPrimary},
			},
			wantCordon: [3]any{5, 30 * time.Second, time.Minute},
			wantLog:    "/var/log/venn/misbehaviour.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := mustParse(t, tt.give).Chains[0].PoolConfig()
			if !reflect.DeepEqual(pc.Consensus, tt.want) {
				t.Errorf("consensus = %+v\nwant %+v", pc.Consensus, tt.want)
			}
			if got := [3]any{pc.Cordon.Strikes, pc.Cordon.Within, pc.Cordon.Period}; got != tt.wantCordon {
				t.Errorf("cordon = %v, want %v", got, tt.wantCordon)
			}
			if pc.MisbehaviourLog != tt.wantLog {
				t.Errorf("misbehaviour_log = %q, want %q", pc.MisbehaviourLog, tt.wantLog)
			}
		})
	}
}

func TestConsensusConfigNamesField(t *testing.T) {
	const p = "chains[0]."
	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "rule fields", give: `    consensus:
      - {methods: [], remotes: 4, agree: 1, on_dispute: vote, trusted_tier: gold, ignore_fields: ["a..b"]}
`, want: []string{
			p + "consensus[0].methods: at least one method is required",
			p + "consensus[0].remotes: is 4, but the chain has 3 remote(s)",
			p + "consensus[0].agree: must be a majority of remotes (4): 3 to 4",
			p + `consensus[0].ignore_fields[0]: must be a field name or a dotted path, not "a..b"`,
			p + `consensus[0].on_dispute (line 10): unknown dispute policy "vote"`,
			p + `consensus[0].trusted_tier (line 10): unknown tier "gold"`,
		}},
		{name: "methods that cannot be voted on", give: `    consensus:
      - {methods: [eth_sendRawTransaction, eth_newFilter, "eth_*", eth_call]}
      - {methods: [eth_call]}
`, want: []string{
			p + "consensus[0].methods[0]: eth_sendRawTransaction is a write",
			p + "consensus[0].methods[1]: eth_newFilter is stateful",
			p + `consensus[0].methods[2]: "eth_*" is not an exact method name`,
			p + "consensus[1].methods[0]: eth_call is already voted on by consensus[0]",
		}},
		{name: "one remote", give: `    consensus: [{methods: [eth_call], remotes: 1}]
`, want: []string{
			p + "consensus[0].remotes: must be at least 2",
		}},
		{name: "cordon", give: `    cordon: {strikes: -1, within: -1s, period: -1m}
`, want: []string{
			p + "cordon.strikes: must be positive",
			p + "cordon.within: must be positive",
			p + "cordon.period: must be positive",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(threeRemotes + tt.give))
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in\n%v", w, err)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", n, len(tt.want), err)
			}
		})
	}
}
