package jrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzMaxItems is small so the fuzzer reaches the batch limit.
const fuzzMaxItems = 8

// FuzzDecode feeds arbitrary bytes through decode, the handler and encode,
// and checks the answer against an oracle built on encoding/json: the
// output is valid JSON, and every input item that is not a notification gets
// exactly one answer, in order, carrying its id byte for byte.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		``,
		` `,
		`{`,
		`[`,
		`]`,
		`null`,
		`1`,
		`"x"`,
		`true`,
		`{}`,
		`[]`,
		`[[]]`,
		`[{}]`,
		`[1,2,3]`,
		`[null]`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`,
		`{"jsonrpc":"2.0","id":"a","method":"m","params":{"k":"v"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"m"}`,
		`{"jsonrpc":"2.0","method":"m"}`,
		`{"jsonrpc":"2.0","id":-1.5e-3,"method":"m","params":null}`,
		`{"jsonrpc":"2.0","id":[1],"method":"m"}`,
		`{"jsonrpc":"2.0","id":{},"method":"m"}`,
		`{"jsonrpc":"2.0","id":true,"method":"m"}`,
		`{"jsonrpc":"1.0","id":1,"method":"m"}`,
		`{"jsonrpc":2,"id":1,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":""}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":"s"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":7}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","Method":"x","ID":3}`,
		`{"\u006asonrpc":"2.0","\u0069d":"\u0031","m\u0065thod":"\u006d"}`,
		`{"jsonrpc":"\u0032.0","id":"\"\\","method":"a\"b"}`,
		`{"jsonrpc":"2.0","id":1,"method":"err"}`,
		`{"jsonrpc":"2.0","id":1,"method":"panic"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"\xfe\"}",
		"\t\r\n [ {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"} , 5 ]\n",
		`[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","method":"m"},{"foo":"bar"},{"jsonrpc":"2.0","id":2,"method":"err"}]`,
		`[{"jsonrpc":"2.0","method":"m"},{"jsonrpc":"2.0","method":"n"}]`,
		`[1,2,3,4,5,6,7,8,9]`,
		`[{"jsonrpc":"2.0","id":1,"method":"m","params":[{"a":["]"]}]}]`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":["\\\"]"]}`,
	} {
		f.Add([]byte(seed))
	}
	// Every request of the transcripts too.
	files, _ := filepath.Glob("testdata/*.txt")
	for _, path := range files {
		file, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "--> "); ok {
				f.Add([]byte(line))
			}
		}
		file.Close()
	}

	s := NewServer(Options{Limits: Limits{MaxBatchItems: fuzzMaxItems}})
	s.Handle("fuzz", HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		switch req.Method {
		case "err":
			return nil, &Error{Code: 3, Message: "reverted \xff\"", Data: json.RawMessage(`{"x":[1]}`)}
		case "panic":
			panic("fuzz")
		}
		return req.Params, nil
	}))
	ch := s.chain("fuzz")

	f.Fuzz(func(t *testing.T, in []byte) {
		out, _ := s.serveMessage(context.Background(), ch, nil, in, nil, true)
		want := expectAnswers(in)
		if len(out) > 0 && !json.Valid(out) {
			t.Fatalf("invalid JSON out for %q: %q", in, out)
		}
		switch {
		case want.whole:
			id, ok := answerID(out)
			if !ok || id != "null" || !isErrorAnswer(out) {
				t.Fatalf("for %q want one error object with id null, got %q", in, out)
			}
		case !want.batch:
			if len(want.ids) == 0 {
				if len(out) != 0 {
					t.Fatalf("notification %q answered: %q", in, out)
				}
				return
			}
			if id, ok := answerID(out); !ok || id != want.ids[0] {
				t.Fatalf("for %q want one answer with id %s, got %q", in, want.ids[0], out)
			}
		default:
			if len(want.ids) == 0 {
				if len(out) != 0 {
					t.Fatalf("batch of notifications %q answered: %q", in, out)
				}
				return
			}
			var answers []json.RawMessage
			if err := json.Unmarshal(out, &answers); err != nil {
				t.Fatalf("for batch %q want an array, got %q", in, out)
			}
			if len(answers) != len(want.ids) {
				t.Fatalf("for batch %q want %d answers, got %d: %q", in, len(want.ids), len(answers), out)
			}
			for i, a := range answers {
				if id, ok := answerID(a); !ok || id != want.ids[i] {
					t.Fatalf("for batch %q answer %d: want id %s, got %q", in, i, want.ids[i], a)
				}
			}
		}
	})
}

type expectation struct {
	whole bool     // one error object answers the message
	batch bool     // an array of answers (or nothing)
	ids   []string // the id of each answer, in order
}

// expectAnswers is the oracle: what the spec says in should get, worked out
// with encoding/json rather than venn's scanner.
func expectAnswers(in []byte) expectation {
	if !json.Valid(in) {
		return expectation{whole: true}
	}
	trimmed := bytes.TrimLeft(in, " \t\r\n")
	switch trimmed[0] {
	case '{':
		var e expectation
		if id, answered := expectItem(trimmed); answered {
			e.ids = []string{id}
		}
		return e
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(in, &elems); err != nil {
			panic(err) // valid JSON array
		}
		if len(elems) == 0 || len(elems) > fuzzMaxItems {
			return expectation{whole: true}
		}
		e := expectation{batch: true}
		for _, el := range elems {
			if id, answered := expectItem(el); answered {
				e.ids = append(e.ids, id)
			}
		}
		return e
	default:
		return expectation{whole: true}
	}
}

// expectItem says whether one request gets an answer, and with what id.
func expectItem(raw []byte) (id string, answered bool) {
	if raw[0] != '{' {
		return "null", true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		panic(err) // valid JSON object
	}
	rawID, hasID := obj["id"]
	validID := !hasID || rawID[0] == '"' || rawID[0] == '-' || (rawID[0] >= '0' && rawID[0] <= '9') || string(rawID) == "null"
	id = "null"
	if hasID && validID {
		id = string(rawID)
	}
	var version, method string
	v, hasV := obj["jsonrpc"]
	okVersion := hasV && v[0] == '"' && json.Unmarshal(v, &version) == nil && version == "2.0"
	m, hasM := obj["method"]
	okMethod := hasM && m[0] == '"' && json.Unmarshal(m, &method) == nil && method != ""
	p, hasP := obj["params"]
	okParams := !hasP || p[0] == '[' || p[0] == '{' || string(p) == "null"
	if !(validID && okVersion && okMethod && okParams) {
		return id, true // invalid: always answered
	}
	return id, hasID
}

// answerID returns the raw id of one answer object, which must carry
// exactly one of result and error.
func answerID(a []byte) (string, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(a, &obj); err != nil {
		return "", false
	}
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	if string(obj["jsonrpc"]) != `"2.0"` || hasResult == hasError {
		return "", false
	}
	id, ok := obj["id"]
	return string(id), ok
}

func isErrorAnswer(a []byte) bool {
	var obj struct {
		Error *Error `json:"error"`
	}
	return json.Unmarshal(a, &obj) == nil && obj.Error != nil
}
