package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestJoin(t *testing.T) {
	tests := []struct {
		name string
		join func([]json.RawMessage) json.RawMessage
		give []string
		want string
	}{
		{"arrays: none", JoinArrays, nil, `[]`},
		{"arrays: one", JoinArrays, []string{`[1,2]`}, `[1,2]`},
		{"arrays: in order", JoinArrays, []string{`[{"a":1}]`, `["x","y"]`, `[null]`}, `[{"a":1},"x","y",null]`},
		{"arrays: empty parts skipped", JoinArrays, []string{`[]`, `[1]`, ` [ ] `, `[2]`, `[]`}, `[1,2]`},
		{"arrays: space around and inside", JoinArrays, []string{" \n[ 1 , 2 ]\t", `[ "3" ]`}, `[1 , 2,"3"]`},
		{"arrays: not arrays skipped", JoinArrays, []string{`{"a":1}`, `[1]`, `null`, ``, `[`}, `[1]`},
		{"arrays: nested arrays kept whole", JoinArrays, []string{`[[1,2],[]]`, `[[3]]`}, `[[1,2],[],[3]]`},
		{"values: none", JoinValues, nil, `[]`},
		{"values: one", JoinValues, []string{`{"a":1}`}, `[{"a":1}]`},
		{"values: in order, kept as they are", JoinValues, []string{`1`, ` "x" `, `[]`, `null`}, `[1, "x" ,[],null]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := make([]json.RawMessage, len(tt.give))
			for i, p := range tt.give {
				parts[i] = json.RawMessage(p)
			}
			if got := string(tt.join(parts)); got != tt.want {
				t.Errorf("%q: got %s, want %s", tt.give, got, tt.want)
			}
		})
	}
}
