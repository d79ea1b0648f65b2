package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// policy is what a chain's Config says of each call and answer, read once.
type policy struct {
	methods       map[string]struct{} // the cached set: DefaultMethods + add - remove - never
	maxEntry      int
	revertSettled bool
	revertRecent  bool
	isRevert      func(method string, err error) bool // nil: none is
}

func newPolicy(c Config, isRevert func(method string, err error) bool) *policy {
	p := &policy{methods: map[string]struct{}{}, maxEntry: c.MaxEntryBytes, isRevert: isRevert,
		revertSettled: *c.CacheReverts.Settled, revertRecent: *c.CacheReverts.Recent}
	for _, m := range slices.Concat(DefaultMethods, c.Methods.Add) {
		if !evm.MatchMethod(c.Methods.Remove, m) && !evm.MatchMethod(c.Methods.Never, m) {
			p.methods[m] = struct{}{}
		}
	}
	// An added method wins over a remove pattern (debug_ removed, one
	// trace added back); never wins over both.
	for _, m := range c.Methods.Add {
		if !evm.MatchMethod(c.Methods.Never, m) {
			p.methods[m] = struct{}{}
		}
	}
	return p
}

// caches reports whether method is in the cached set.
func (p *policy) caches(method string) bool {
	_, ok := p.methods[method]
	return ok
}

// entry is what of an upstream answer is stored: a result, null excepted
// (a block the remote lacks), or a revert where the config keeps reverts;
// never an upstream fault, limit, timeout or missing data. ok is false
// for anything else and for answers over max_entry_bytes.
func (p *policy) entry(method string, at pin, res json.RawMessage, err error) (Entry, bool) {
	e := Entry{Settled: at.settled, Method: method, Block: at.number}
	switch {
	case err == nil:
		res = bytes.TrimSpace(res)
		if len(res) == 0 || string(res) == "null" {
			return Entry{}, false
		}
		e.Value = bytes.Clone(res)
	case p.keepsRevert(method, at, err):
		je, _ := errors.AsType[*jrpc.Error](err)
		v, merr := json.Marshal(je)
		if merr != nil {
			return Entry{}, false
		}
		e.Value, e.Error = v, true
	default:
		return Entry{}, false
	}
	if len(e.Value) > p.maxEntry {
		return Entry{}, false
	}
	return e, true
}

// keepsRevert reports a revert (the caller's own error, by the contract at
// that block, as the remotes classify it) that the config keeps at at.
func (p *policy) keepsRevert(method string, at pin, err error) bool {
	if _, ok := errors.AsType[*jrpc.Error](err); !ok || p.isRevert == nil || !p.isRevert(method, err) {
		return false
	}
	if at.settled {
		return p.revertSettled
	}
	return p.revertRecent
}

// answer is an entry as the client gets it; ok is false for a stored
// error that does not decode (a tier's corruption: a miss).
func (e Entry) answer() (res json.RawMessage, err error, ok bool) {
	if !e.Error {
		return e.Value, nil, len(e.Value) > 0
	}
	je := new(jrpc.Error)
	if json.Unmarshal(e.Value, je) != nil {
		return nil, nil, false
	}
	return nil, je, true
}
