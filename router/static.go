package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/venn-gateway/venn/jrpc"
)

// StaticAnswer is one entry of a chain's static_answers: a method, and
// optionally its exact params, answered from config without any source
// (a pinned net_version or web3_clientVersion, a private chain's quirks).
// Result and Error are YAML values, sent as their JSON.
type StaticAnswer struct {
	Method string `yaml:"method"`
	// Params, when set, must equal the call's params (as JSON values: key
	// order and spacing aside); unset answers the method whatever its
	// params. An entry with params is tried before one without.
	Params any `yaml:"params"`
	// Result is the answer; exactly one of Result and Error is set.
	Result any `yaml:"result"`
	// Error answers the call with this JSON-RPC error instead.
	Error *StaticError `yaml:"error"`
}

// StaticError is a static answer's error object.
type StaticError struct {
	Code    int    `yaml:"code"`
	Message string `yaml:"message"`
	Data    any    `yaml:"data"`
}

// ValidateStatic reports every problem of a chain's static answers, each
// naming its entry (static_answers[0].result).
func ValidateStatic(list []StaticAnswer) error {
	_, err := compileStatic(list)
	return err
}

// staticTable is the compiled static answers, by method.
type staticTable map[string][]staticEntry

type staticEntry struct {
	params json.RawMessage // canonical JSON; nil: any params
	result json.RawMessage
	err    *jrpc.Error
}

// compileStatic turns the entries into their table, or reports every
// problem found.
func compileStatic(list []StaticAnswer) (staticTable, error) {
	if len(list) == 0 {
		return nil, nil
	}
	var errs []error
	bad := func(i int, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("static_answers[%d].%s: %s", i, field, fmt.Sprintf(format, args...)))
	}
	t := make(staticTable, len(list))
	seen := map[string]int{}
	for i, a := range list {
		var e staticEntry
		switch a.Method {
		case "":
			bad(i, "method", "required")
		case "eth_subscribe", "eth_unsubscribe":
			bad(i, "method", "%s is served by subscriptions, not answered from config", a.Method)
		}
		if a.Params != nil {
			p, err := canonicalJSON(a.Params)
			switch {
			case err != nil:
				bad(i, "params", "not a JSON value: %v", err)
			case len(p) == 0 || p[0] != '[' && p[0] != '{':
				bad(i, "params", "must be a list or a map, as JSON-RPC params are")
			}
			e.params = p
		}
		switch {
		case a.Result != nil && a.Error != nil:
			bad(i, "result", "set result or error, not both")
		case a.Result == nil && a.Error == nil:
			bad(i, "result", "required (or error)")
		case a.Error != nil:
			if a.Error.Message == "" {
				bad(i, "error.message", "required")
			}
			e.err = &jrpc.Error{Code: a.Error.Code, Message: a.Error.Message}
			if a.Error.Data != nil {
				d, err := canonicalJSON(a.Error.Data)
				if err != nil {
					bad(i, "error.data", "not a JSON value: %v", err)
				}
				e.err.Data = d
			}
		default:
			r, err := canonicalJSON(a.Result)
			if err != nil {
				bad(i, "result", "not a JSON value: %v", err)
			}
			e.result = r
		}
		key := a.Method + "\x00" + string(e.params)
		if first, dup := seen[key]; dup {
			bad(i, "method", "answers the same call as static_answers[%d]", first)
		}
		seen[key] = i
		t[a.Method] = append(t[a.Method], e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Exact params first, then the entry for any params.
	for m, es := range t {
		var exact, any []staticEntry
		for _, e := range es {
			if e.params != nil {
				exact = append(exact, e)
			} else {
				any = append(any, e)
			}
		}
		t[m] = append(exact, any...)
	}
	return t, nil
}

// canonicalJSON is v (from YAML, or decoded JSON) as JSON with map keys
// sorted: two spellings of one value come out the same.
func canonicalJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(normalizeYAML(v))
	return b, err
}

// normalizeYAML turns the map[any]any a YAML decoder may produce into
// map[string]any, which encoding/json takes.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[fmt.Sprint(k)] = normalizeYAML(val)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[k] = normalizeYAML(val)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = normalizeYAML(val)
		}
		return out
	}
	return v
}

// answer finds the static answer of a call, if there is one.
func (t staticTable) answer(method string, params json.RawMessage) (res json.RawMessage, ok bool, err error) {
	es := t[method]
	if len(es) == 0 {
		return nil, false, nil
	}
	var canon json.RawMessage
	for _, e := range es {
		if e.params != nil {
			if canon == nil {
				canon = canonicalParams(params)
			}
			if !bytes.Equal(canon, e.params) {
				continue
			}
		}
		if e.err != nil {
			return nil, true, e.err
		}
		return e.result, true, nil
	}
	return nil, false, nil
}

// canonicalParams is a call's params as canonicalJSON spells them; absent
// params are [], as nodes read them.
func canonicalParams(params json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		return json.RawMessage("[]")
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(params))
	d.UseNumber() // 1e3 and 1000 stay apart, as a node would see them
	if d.Decode(&v) != nil {
		return json.RawMessage("invalid")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("invalid")
	}
	return b
}

// SetStaticAnswers puts a chain's static answers in force (validated by
// ValidateStatic), for a configuration reload too.
func (rt *Router) SetStaticAnswers(list []StaticAnswer) {
	t, _ := compileStatic(list)
	if t == nil {
		rt.static.Store(nil)
		return
	}
	rt.static.Store(&t)
}

// staticAnswer answers a call from the chain's static answers.
func (rt *Router) staticAnswer(req *jrpc.Request) (res json.RawMessage, ok bool, err error) {
	t := rt.static.Load()
	if t == nil {
		return nil, false, nil
	}
	return t.answer(req.Method, req.Params)
}
