package verified

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	integ "github.com/venn-gateway/venn/integrity"
)

type remote string

func (r remote) Name() string { return string(r) }

// verdicts reads an answer as the verdict it stands for: "ok" passes the
// block hash, "bad" fails it.
func verdicts(res json.RawMessage) integ.Verdict {
	var v integ.Verdict
	if string(res) == `"bad"` {
		v.Failed = []integ.Failure{{Check: integ.CheckBlockHash, Detail: "hash"}}
	} else {
		v.Passed = 1 << integ.CheckBlockHash
	}
	return v
}

// TestServe: a lie is proved only by an answer that passes the check the
// liar failed; when every answer fails, the first is served, nobody is
// blamed, and a check two remotes failed alike is skipped on the chain.
func TestServe(t *testing.T) {
	tests := []struct {
		name    string
		give    []string // answers in the order they came; the last is what the send returned
		wantRes string
		wantLie []string
		skipped float64 // block_hash skipped as unreproducible
		excused bool    // block_hash skipped on the chain afterwards
	}{
		{name: "honest", give: []string{`"ok"`}, wantRes: `"ok"`},
		{name: "one liar", give: []string{`"bad"`, `"ok"`}, wantRes: `"ok"`, wantLie: []string{"r0"}},
		{name: "one unreproducible", give: []string{`"bad"`}, wantRes: `"bad"`, skipped: 1},
		{name: "all alike", give: []string{`"bad"`, `"bad"`}, wantRes: `"bad"`, skipped: 1, excused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(nil)
			ch := NewChain("test", nil, m)
			now := time.Unix(1000, 0)
			vc := NewCall[remote](ch, "eth_getBlockByNumber", verdicts, func() time.Time { return now })
			var res json.RawMessage
			err := errors.New("no remote served")
			for i, a := range tt.give {
				res = json.RawMessage(a)
				if vc.Check(remote("r"+string(rune('0'+i))), res) == nil {
					err = nil
				}
			}
			var lied []string
			got, v, err := vc.Serve(res, err, func(r remote, _ integ.Verdict) { lied = append(lied, r.Name()) })
			if err != nil || string(got) != tt.wantRes {
				t.Fatalf("served %s, %v; want %s", got, err, tt.wantRes)
			}
			if len(lied) != len(tt.wantLie) || (len(lied) > 0 && lied[0] != tt.wantLie[0]) {
				t.Errorf("lied %v, want %v", lied, tt.wantLie)
			}
			if len(v.Failed) != 0 {
				t.Errorf("served verdict fails %v", v.Failed)
			}
			if s := testutil.ToFloat64(m.Skipped("test", "block_hash", string(integ.SkipUnreproducible))); s != tt.skipped {
				t.Errorf("skipped %v, want %v", s, tt.skipped)
			}
			if ex := ch.excused(now).Has(integ.CheckBlockHash); ex != tt.excused {
				t.Errorf("excused %v, want %v", ex, tt.excused)
			}
			if ch.excused(now.Add(UnreproducibleTTL)).Has(integ.CheckBlockHash) {
				t.Error("still excused after UnreproducibleTTL")
			}
		})
	}
}
