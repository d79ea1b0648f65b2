package evm

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestLogFilterParse(t *testing.T) {
	a1 := `"0x00000000000000000000000000000000000000a1"`
	t1 := `"0x00000000000000000000000000000000000000000000000000000000000000b1"`
	tests := []struct {
		give   string
		ok     bool
		from   BlockRef
		byHash bool
		ntop   int
	}{
		{give: `{}`, ok: true, from: BlockRef{Kind: RefLatest}},
		{give: `{"fromBlock":"0x10","toBlock":"latest","address":` + a1 + `}`, ok: true, from: BlockRef{Kind: RefNumber, Number: 16}},
		{give: `{"fromBlock":null,"address":[],"topics":[]}`, ok: true, from: BlockRef{Kind: RefLatest}},
		{give: `{"blockHash":` + t1 + `,"topics":[null,[` + t1 + `,null]]}`, ok: true, from: BlockRef{Kind: RefLatest}, byHash: true, ntop: 2},
		{give: `{"topics":[null,null,null,null]}`, ok: true, from: BlockRef{Kind: RefLatest}, ntop: 4},
		{give: `{"extra":1,"limit":[2]}`, ok: true, from: BlockRef{Kind: RefLatest}},
		{give: `{"topics":[null,null,null,null,null]}`},      // geth: too many positions
		{give: `{"blockHash":` + t1 + `,"fromBlock":"0x1"}`}, // geth: hash with a range
		{give: `{"fromBlock":"0x01"}`},                        // leading zero
		{give: `{"fromBlock":"0x8000000000000000"}`},          // past MaxInt64
		{give: `{"address":"0x1234"}`},                        // not 20 bytes
		{give: `{"Address":` + a1 + `}`},                      // encoding/json would fold it
		{give: `{"address":` + a1 + `,"address":` + a1 + `}`}, // duplicate
		{give: `{"topics":["0x01"]}`},                         // not 32 bytes
		{give: `{"topics":[[` + t1 + `,"0xzz"]]}`},            // bad alternative
		{give: `null`},
		{give: `[]`},
		{give: `{"address":[` + strings.Repeat(a1+",", LogQueryLimit) + a1 + `]}`}, // over the limit
	}
	for _, tt := range tests {
		var f LogFilter
		ok := f.Parse([]byte(tt.give))
		if ok != tt.ok {
			t.Errorf("Parse(%.80s) = %v, want %v", tt.give, ok, tt.ok)
			continue
		}
		if ok && (f.From != tt.from || f.ByHash != tt.byHash || f.NTopics != tt.ntop) {
			t.Errorf("Parse(%.80s): from %+v byHash %v topics %d; want %+v %v %d", tt.give, f.From, f.ByHash, f.NTopics, tt.from, tt.byHash, tt.ntop)
		}
	}
}

func TestLogFilterMatch(t *testing.T) {
	a1, a2 := "0x00000000000000000000000000000000000000a1", "0x00000000000000000000000000000000000000a2"
	t1, t2 := "0x00000000000000000000000000000000000000000000000000000000000000b1", "0x00000000000000000000000000000000000000000000000000000000000000b2"
	q := func(s string) string { return `"` + s + `"` }
	upper := q("0x" + strings.ToUpper(a1[2:]))
	many := make([]string, 0, 8)
	for range 6 {
		many = append(many, q(a2))
	}
	many = append(many, q(a1))
	tests := []struct {
		filter string
		addr   string
		topics []string
		want   bool
	}{
		{`{}`, a1, nil, true},
		{`{"address":` + q(a1) + `}`, a1, nil, true},
		{`{"address":` + upper + `}`, a1, nil, true},
		{`{"address":` + q(a2) + `}`, a1, nil, false},
		{`{"address":[` + strings.Join(many, ",") + `]}`, a1, nil, true},
		{`{"address":[` + strings.Join(many[:6], ",") + `]}`, a1, nil, false},
		{`{"topics":[null]}`, a1, nil, false}, // a position the log lacks
		{`{"topics":[null]}`, a1, []string{t2}, true},
		{`{"topics":[[]]}`, a1, []string{t2}, true},
		{`{"topics":[` + q(t1) + `]}`, a1, []string{t2, t1}, false},
		{`{"topics":[null,[` + q(t2) + `,` + q(t1) + `]]}`, a1, []string{t2, t1}, true},
		{`{"topics":[[` + q(t2) + `,null]]}`, a1, []string{t1}, true}, // a null makes the position a wildcard
	}
	for _, tt := range tests {
		var f LogFilter
		if !f.Parse([]byte(tt.filter)) {
			t.Fatalf("Parse(%s) failed", tt.filter)
		}
		if got := f.Match(tt.addr, tt.topics); got != tt.want {
			t.Errorf("%s Match(%s, %v) = %v, want %v", tt.filter, tt.addr, tt.topics, got, tt.want)
		}
		var vals [][]byte
		for v := range f.Address.Values() {
			vals = append(vals, v)
		}
		if f.Address.Any() != (len(vals) == 0) {
			t.Errorf("%s: Any %v with %d values", tt.filter, f.Address.Any(), len(vals))
		}
		for _, v := range vals {
			if !bytes.HasPrefix(bytes.ToLower(v), []byte("0x")) || len(v) != AddressLen {
				t.Errorf("%s: value %q", tt.filter, v)
			}
		}
	}
}

// TestTopicCriteria: criteria built from a filter's values match every log
// as the filter Parse read does, so a logs subscription and eth_getLogs
// agree.
func TestTopicCriteria(t *testing.T) {
	t1, t2, t3 := "0x"+strings.Repeat("0", 62)+"b1", "0x"+strings.Repeat("0", 62)+"b2", "0x"+strings.Repeat("0", 62)+"b3"
	q := func(s string) string { return `"` + s + `"` }
	tests := []struct {
		give   [][]string
		filter string // the same topics, as eth_getLogs names them
	}{
		{give: nil, filter: `{}`},
		{give: [][]string{nil}, filter: `{"topics":[null]}`},
		{give: [][]string{{t1}}, filter: `{"topics":[` + q(t1) + `]}`},
		{give: [][]string{nil, {t2, t1}}, filter: `{"topics":[null,[` + q(t2) + `,` + q(t1) + `]]}`},
		{give: [][]string{{t1, t2, t3, t1, t2}}, filter: `{"topics":[[` + strings.Join([]string{q(t1), q(t2), q(t3), q(t1), q(t2)}, ",") + `]]}`},
		{give: [][]string{{t3}, nil, {t2}, {t1}}, filter: `{"topics":[` + q(t3) + `,null,` + q(t2) + `,` + q(t1) + `]}`},
	}
	logs := [][]string{nil, {t1}, {t2}, {t3}, {t2, t1}, {t1, t2}, {t3, t1, t2, t1}, {t3, t3, t2, t1, t1}}
	for _, tt := range tests {
		var f LogFilter
		if !f.Parse([]byte(tt.filter)) {
			t.Fatalf("Parse(%s) failed", tt.filter)
		}
		c := TopicCriteria(tt.give)
		if len(c) != f.NTopics {
			t.Fatalf("%v: %d positions, the filter has %d", tt.give, len(c), f.NTopics)
		}
		for i := range c {
			var got []string
			for v := range c[i].Values() {
				got = append(got, string(v))
			}
			if !slices.Equal(got, tt.give[i]) || c[i].Any() != (len(tt.give[i]) == 0) {
				t.Errorf("%v: position %d holds %v (any %v)", tt.give, i, got, c[i].Any())
			}
		}
		for _, l := range logs {
			if got, want := MatchTopics(c, l), f.Match("0x"+strings.Repeat("0", 40), l); got != want {
				t.Errorf("%v on topics %v: %v, the filter says %v", tt.give, l, got, want)
			}
		}
	}
}
