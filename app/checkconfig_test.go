package app

import (
	"strings"
	"testing"
)

// What venn check-config prints for a file with problems: every problem,
// once, each at its field and its line in the file.
func TestParseReportsEveryProblemAtItsLine(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string // the problems, in order, one per line
	}{
		{
			// A variable that is not set is one problem among the others,
			// and what follows from it (an empty url) is not another.
			name: "a missing variable does not hide the others",
			give: `listen: ${VENN_CC_UNSET_LISTEN}
chains:
  - name: a
    chain_id: 1
    remotes:
      - name: b
        url: ${VENN_CC_UNSET_URL}
        tier: gold
      - {name: c, url: "ftp://127.0.0.1"}
    max_lagg: 3
`,
			want: []string{
				"listen (line 1): environment variable VENN_CC_UNSET_LISTEN is not set",
				"chains[0].remotes[0].url (line 7): environment variable VENN_CC_UNSET_URL is not set",
				`chains[0].max_lagg (line 10): field max_lagg not found in a chain; did you mean "max_lag"?`,
				`chains[0].remotes[0].tier (line 8): unknown tier "gold" (want primary, secondary or fallback)`,
				"chains[0].remotes[1].url: must be http(s):// or ws(s)://",
			},
		},
		{
			name: "a missing variable in a value of the wrong type",
			give: `chains:
  - name: a
    chain_id: ${VENN_CC_UNSET_ID}
    remotes:
      - {name: b, url: "http://127.0.0.1:1"}
    block_time: soon
`,
			want: []string{
				"chains[0].chain_id (line 3): environment variable VENN_CC_UNSET_ID is not set",
				"chains[0].block_time (line 6): cannot unmarshal !!str `soon` into a duration (like 10s)",
			},
		},
		{
			// A key twice in a flow mapping that spans lines: the lines
			// are the file's, and the mapping the decoder then skips
			// raises nothing more ("at least one chain is required").
			name: "a key twice in a flow document",
			give: `{
  listen: "127.0.0.1:1",
  chains: [
    {name: a, chain_id: 1,
     remotes: [{name: b, url: "http://127.0.0.1:1"}]}
  ],
  listen: "127.0.0.1:2"
}
`,
			want: []string{`listen (line 7): mapping key "listen" already defined at line 2`},
		},
		{
			name: "a key twice after comments and blank lines",
			give: `# venn

listen: 127.0.0.1:1

chains:
  - name: a
    chain_id: 1
    remotes:
      - {name: b, url: "http://127.0.0.1:1"}
    chain_id: 2
`,
			want: []string{`chains[0].chain_id (line 10): mapping key "chain_id" already defined at line 7`},
		},
		{
			// Several fields on one line: the one the message quotes.
			name: "a bad value among others on its line",
			give: `# venn

chains:
  - {name: a, chain_id: one, remotes: [{name: b, url: "http://127.0.0.1:1"}]}
`,
			want: []string{"chains[0].chain_id (line 4): cannot unmarshal !!str `one` into uint64"},
		},
		{
			// The parser's line, and no word about ${...} in flow
			// collections, which are quoted here.
			name: "a syntax error on line 7",
			give: `listen: "${VENN_CC_UNSET_LISTEN:-127.0.0.1:1}"
redis: {url: "${VENN_CC_UNSET_REDIS:-}"}
chains:
  - name: a
    chain_id: 1
    remotes:
      - name: b
	  url: http://127.0.0.1:1
`,
			want: []string{"config: yaml: line 7: found a tab character that violates indentation"},
		},
		{
			name: "unknown keys, near and far from known ones",
			give: `listn: 127.0.0.1:1
limits: {max_body: 1}
chains:
  - name: a
    chainid: 1
    remotes:
      - {name: b, urll: "http://127.0.0.1:1", url: "http://127.0.0.1:2"}
    head: {windw: 4, something_else: 1}
`,
			want: []string{
				`listn (line 1): field listn not found in the top level; did you mean "listen"?`,
				`limits.max_body (line 2): field max_body not found in limits`,
				`chains[0].chainid (line 5): field chainid not found in a chain; did you mean "chain_id"?`,
				`chains[0].remotes[0].urll (line 7): field urll not found in a remote; did you mean "url"?`,
				`chains[0].head.windw (line 8): field windw not found in head; did you mean "window"?`,
				`chains[0].head.something_else (line 8): field something_else not found in head`,
				"chains[0].chain_id: required, must be > 0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if err == nil {
				t.Fatal("Parse succeeded, want problems")
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("problems:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestClosestKey(t *testing.T) {
	fields := yamlFields(configType)
	tests := []struct{ give, want string }{
		{give: "listen_address", want: ""}, // too far: no guess
		{give: "metrics_lissten", want: "metrics_listen"},
		{give: "Listen", want: "listen"},
		{give: "foo", want: ""},
		{give: "", want: ""},
	}
	for _, tt := range tests {
		if got := closestKey(tt.give, fields); got != tt.want {
			t.Errorf("closestKey(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
