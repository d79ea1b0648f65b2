package remotes

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// The pool's own answers to a call no remote served. Each says why in the
// words a client gets and carries its JSON-RPC code (ErrorCode) and data
// (ErrorData); jrpc.ToWire is the one place they become wire errors. None
// names a remote's URL.

// noRemoteError: no remote of the chain could serve the call (-32050).
// With tried 0 none was available; else tried remotes failed, the last
// with last. (A transaction route's group that failed is side.GroupError.)
type noRemoteError struct {
	method, chain string
	tried         int
	last          verdict.Reason
	// remotes is each remote's state (the data).
	remotes []RemoteReason
}

func (e *noRemoteError) Error() string {
	if e.tried == 0 {
		return fmt.Sprintf("no remote available for %s on %s", e.method, e.chain)
	}
	return fmt.Sprintf("all %d remote(s) tried failed for %s on %s (last: %s)", e.tried, e.method, e.chain, e.last)
}

func (e *noRemoteError) ErrorCode() int { return jrpc.CodeNoRemote }

// ErrorData names each remote of the chain, why it is out of rotation and
// what it last failed with (Pool.reasons), so a caller told "no remote" learns
// why (no network: dns; a proxy: tls).
func (e *noRemoteError) ErrorData() json.RawMessage {
	b, err := json.Marshal(struct {
		Remotes []RemoteReason `json:"remotes"`
	}{e.remotes})
	if err != nil {
		return nil
	}
	return b
}

// floorError: no remote in rotation has a head at or above the call's
// floor (jrpc.MinHead, a gRPC client's height selector) (-32050); no
// remote was asked.
type floorError struct {
	chain       string
	floor, best uint64
}

func (e *floorError) Error() string {
	return fmt.Sprintf("no remote of %s is at or above block %d (the minimum height asked): the highest head in rotation is %d",
		e.chain, e.floor, e.best)
}

func (e *floorError) ErrorCode() int { return jrpc.CodeNoRemote }

func (e *floorError) ErrorData() json.RawMessage {
	return fmt.Appendf(nil, `{"min_height":%d,"highest_head":%d}`, e.floor, e.best)
}

// timeoutError: the call's deadline passed before an answer (-32051).
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string  { return e.msg }
func (e *timeoutError) ErrorCode() int { return jrpc.CodeTimeout }

// limitError: the call or its answer broke one of venn's limits (-32052).
type limitError struct{ msg string }

func (e *limitError) Error() string  { return e.msg }
func (e *limitError) ErrorCode() int { return jrpc.CodeLimitExceeded }

// disagreeError: a voted call found no answer enough remotes agreed on
// (-32058).
type disagreeError struct {
	method                 string
	agree, voters, answers int
}

func (e *disagreeError) Error() string {
	return fmt.Sprintf("remotes disagree on %s: no answer was given by %d remote(s); %d answered with %d different answer(s)",
		e.method, e.agree, e.voters, e.answers)
}

func (e *disagreeError) ErrorCode() int { return jrpc.CodeRemotesDisagree }

// unavailableError: the call reads data at a block older than any remote
// of the chain keeps (-32059); no remote was asked.
type unavailableError struct {
	chain         string
	kind          DataKind
	block, oldest uint64
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%s at block %d is not available on %s: the oldest block any remote serves is %d",
		e.kind, e.block, e.chain, e.oldest)
}

func (e *unavailableError) ErrorCode() int { return jrpc.CodeBlockUnavailable }

func (e *unavailableError) ErrorData() json.RawMessage {
	return fmt.Appendf(nil, `{"block":%d,"oldest_available":%d,"kind":%q}`, e.block, e.oldest, e.kind.String())
}

// unservedError: no remote serves the method (-32601, as a node answers a
// method it does not have).
type unservedError struct{ method string }

func (e *unservedError) Error() string {
	return "the method " + e.method + " does not exist/is not available"
}

func (e *unservedError) ErrorCode() int { return jrpc.CodeMethodNotFound }

// errReplyTooLarge is what the client gets for an answer over the cap:
// venn's limit, named, and no remote's name.
func errReplyTooLarge(limit int64) error {
	return &limitError{msg: "answer too large: the remote's reply exceeds max_response_bytes (" +
		strconv.FormatInt(limit, 10) + " bytes)"}
}
