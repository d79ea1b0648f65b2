package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Bounds of the JSON-RPC server error range, which venn uses for its own
// conditions (codes.go). A coder error outside it is not trusted to mean
// what the client would read into a standard code.
const (
	minServerCode = -32099
	maxServerCode = -32000
)

// ToWire is the one place an internal error becomes a wire error:
//
//   - a *Error anywhere in the chain (an upstream's answer) is returned as is;
//   - an error in the chain with ErrorCode() in -32099..-32000 (venn's own
//     conditions), or one of the standard codes a node answers a well-formed
//     call with (ownStandard), keeps its code, its own message (not the
//     text of what wraps it) and the data its ErrorData() gives;
//   - context.DeadlineExceeded becomes CodeTimeout;
//   - anything else becomes CodeInternal with a fixed message, so no detail
//     (a remote's name, an address) leaks to clients. The Server logs the
//     detail; ToWire does not.
func ToWire(err error) *Error {
	e, _ := toWire(err)
	return e
}

// toWire is ToWire that also reports whether the error was unknown, which the
// Server logs.
func toWire(err error) (e *Error, unknown bool) {
	if err == nil {
		return nil, false
	}
	if errors.As(err, &e) {
		return e, false
	}
	if c, ok := errors.AsType[coder](err); ok {
		if code := c.ErrorCode(); code >= minServerCode && code <= maxServerCode || ownStandard(code) {
			e = &Error{Code: code, Message: c.Error()}
			if d, ok := c.(dataCoder); ok {
				e.Data = d.ErrorData()
			}
			return e, false
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeTimeout, Message: "request timed out"}, false
	}
	return &Error{Code: CodeInternal, Message: "internal error"}, true
}

// ownStandard reports a standard code a domain error may carry to the
// client as a node would: CodeMethodNotFound (a method or subscription venn
// does not serve), CodeInvalidParams (params of a method venn answers
// itself, read as geth reads them) and CodeInternal (a failure of venn's
// own that the error words for the client, no detail in it). The others
// (-32700, -32600) are the transport's, never a handler's.
func ownStandard(code int) bool {
	return code == CodeMethodNotFound || code == CodeInvalidParams || code == CodeInternal
}

// localError marks an error venn answered itself (Local).
type localError struct{ err error }

func (l localError) Error() string { return l.err.Error() }
func (l localError) Unwrap() error { return l.err }

// Local marks err as venn's own answer, made from what it knew before the
// call (an earlier answer of a remote, its own configuration) with no
// upstream call for this one: the part that would have forwarded the call
// notes it answered by source "local", so the diagnostic headers, the
// request log and the answers' count name the source that answered. The
// wire error stays err's (ToWire looks through the mark).
func Local(err error) error {
	if err == nil {
		return nil
	}
	return localError{err: err}
}

// IsLocal reports an error marked by Local.
func IsLocal(err error) bool {
	_, ok := errors.AsType[localError](err)
	return ok
}

// Wire errors of the transport itself.

func errParse() *Error { return &Error{Code: CodeParseError, Message: "parse error"} }

func errInvalid(why string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "invalid request: " + why}
}

func errEmptyBatch() *Error { return &Error{Code: CodeInvalidRequest, Message: "empty batch"} }

func errBatchTooLarge(n, limit int) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "batch of " + strconv.Itoa(n) +
		" items exceeds max_batch_items (" + strconv.Itoa(limit) + ")"}
}

func errBodyTooLarge(limit int64) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "request body exceeds max_body_bytes (" +
		strconv.FormatInt(limit, 10) + " bytes)"}
}

func errMessageTooLarge(limit int64) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "message exceeds max_ws_message_bytes (" +
		strconv.FormatInt(limit, 10) + " bytes)"}
}

func errTooManyConnections(limit int) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "too many WebSocket connections: max_connections (" +
		strconv.Itoa(limit) + ") reached"}
}

func errTooManyConnectionsFromIP(limit int) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "too many WebSocket connections from this address: max_connections_per_ip (" +
		strconv.Itoa(limit) + ") reached"}
}

func errTooManyHTTPRequests(limit int) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "too many HTTP requests in flight: max_http_in_flight (" +
		strconv.Itoa(limit) + ") reached; retry shortly"}
}

func errBodyTimeout(d time.Duration) *Error {
	return &Error{Code: CodeLimitExceeded, Message: "request body not received within http_read_timeout (" +
		d.String() + ")"}
}

func errShuttingDown() *Error {
	return &Error{Code: CodeShuttingDown, Message: "server is shutting down"}
}

func errPanic() *Error { return &Error{Code: CodeInternal, Message: "internal error"} }

// maxEchoedPath bounds how much of a client's URL path an error repeats;
// maxListedChains how many chain paths its message lists (data has all).
const (
	maxEchoedPath   = 128
	maxListedChains = 16
)

// errUnknownChain answers a path that names no chain with the paths that
// do, so that a client pointed at the wrong URL learns the right one.
func errUnknownChain(path string, chains []string) *Error {
	if len(path) > maxEchoedPath {
		path = path[:maxEchoedPath] + "..."
	}
	msg := "no chain is served at " + strconv.Quote(path)
	switch n := len(chains); {
	case n == 0:
		msg += "; no chain is configured"
	case n <= maxListedChains:
		msg += "; chains are served at " + strings.Join(chains, ", ")
	default:
		msg += "; chains are served at " + strings.Join(chains[:maxListedChains], ", ") +
			" and " + strconv.Itoa(n-maxListedChains) + " more"
	}
	data, _ := json.Marshal(struct {
		Chains []string `json:"chains"`
	}{Chains: append([]string{}, chains...)}) // [] rather than null
	return &Error{Code: CodeUnknownChain, Message: msg, Data: data}
}

func errMethodNotAllowed(method string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "HTTP method " + method +
		" not allowed: use POST, or GET with a WebSocket upgrade"}
}

func errContentType() *Error {
	return &Error{Code: CodeInvalidRequest, Message: "Content-Type must be application/json"}
}
