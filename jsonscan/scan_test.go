package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// elements lists an array's elements with the scanner.
func elements(data []byte) ([][]byte, bool) {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	var out [][]byte
	it := Array{Data: data, I: i + 1}
	for n := 0; n <= len(data); n++ { // an array of n bytes has fewer than n elements
		v, ok := it.Next()
		if !ok {
			break
		}
		out = append(out, v)
	}
	return out, true
}

func members(data []byte) map[string][]byte {
	out := map[string][]byte{}
	it := Object{Data: data, I: bytes.IndexByte(data, '{') + 1}
	for n := 0; n <= len(data); n++ {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		out[string(k)] = v
	}
	return out
}

func TestArrayElements(t *testing.T) {
	for _, tt := range []struct {
		give string
		want []string
	}{
		{`[]`, nil},
		{` [ ] `, nil},
		{`["0xab","latest"]`, []string{`"0xab"`, `"latest"`}},
		{`[ {"a":[1,{"b":"]"}]} , "x\"]," ,true,null,-1.5e3 ]`, []string{`{"a":[1,{"b":"]"}]}`, `"x\"],"`, `true`, `null`, `-1.5e3`}},
		{`["a\\",1]`, []string{`"a\\"`, `1`}},
	} {
		got, ok := elements([]byte(tt.give))
		if !ok || len(got) != len(tt.want) {
			t.Fatalf("%s: got %q, want %q", tt.give, got, tt.want)
		}
		for i := range got {
			if string(got[i]) != tt.want[i] {
				t.Errorf("%s: element %d = %s, want %s", tt.give, i, got[i], tt.want[i])
			}
		}
	}
}

func TestObjectMembers(t *testing.T) {
	got := members([]byte(`{"jsonrpc":"2.0", "id" : [1,"}"], "method":"x\"y","params":{}}`))
	want := map[string]string{"jsonrpc": `"2.0"`, "id": `[1,"}"]`, "method": `"x\"y"`, "params": `{}`}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("member %s = %s, want %s", k, got[k], v)
		}
	}
}

// FuzzArray checks the scanner against encoding/json on valid arrays and
// that it stays in bounds on anything.
func FuzzArray(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a",{"b":[2]},null]`, `["\\\"",[[]]]`, `[`, `["`, `[1,`, `{"a":`, `"\`, `[1 2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, isArray := elements(data) // must not panic whatever data is
		_ = members(data)
		if !json.Valid(data) || !isArray {
			return
		}
		var want []json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d elements, encoding/json finds %d", data, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%q: element %d = %q, encoding/json: %q", data, i, got[i], want[i])
			}
		}
	})
}

// FuzzValidValue holds the checking scanner to encoding/json's verdict.
func FuzzValidValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,true,null,"\u00e9\n"]}`, `[`, `"\x01"`, `01`, `{"a" 1}`, `-`, `1.`, `[1,]`, `"\uzzzz"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if ok := Valid(data); ok != json.Valid(data) {
			_, err := ValidValue(data, SkipSpace(data, 0), 0)
			t.Fatalf("%q: scanner says valid=%v, encoding/json %v (%v)", data, ok, json.Valid(data), err)
		}
	})
}
