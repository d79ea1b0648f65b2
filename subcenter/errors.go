package subcenter

import "github.com/venn-gateway/venn/jrpc"

// The answers a subscriber or a filter's client gets for a call the Center
// or the Filters refused. Each says why in geth's words where geth has them
// (clients match on them) and carries its JSON-RPC code (ErrorCode);
// jrpc.ToWire is the one place they become wire errors. An upstream's own
// error, met on the way, is passed on as it came.

// plainError is geth's plain error (-32000): what geth answers with an
// errors.New of its own (a subscription or filter not found, a resume
// refused).
type plainError struct{ msg string }

func (e *plainError) Error() string  { return e.msg }
func (e *plainError) ErrorCode() int { return -32000 }

// paramsError: params venn reads itself (eth_subscribe, the filter
// methods), refused as geth refuses them (-32602).
type paramsError struct{ msg string }

func (e *paramsError) Error() string  { return e.msg }
func (e *paramsError) ErrorCode() int { return jrpc.CodeInvalidParams }

func invalidParams(msg string) error { return &paramsError{msg: msg} }

// unservedError: a method or subscription venn does not serve on this
// chain, answered as a node answers a method it lacks (-32601).
type unservedError struct{ msg string }

func (e *unservedError) Error() string  { return e.msg }
func (e *unservedError) ErrorCode() int { return jrpc.CodeMethodNotFound }

// stoppedError: the Center stopped; venn is draining (-32054).
type stoppedError struct{}

func (stoppedError) Error() string  { return "server is shutting down" }
func (stoppedError) ErrorCode() int { return jrpc.CodeShuttingDown }

// storeDownError: the cluster's filter store failed (-32603); the detail
// is logged (Filters.storeError), never sent.
type storeDownError struct{}

func (storeDownError) Error() string {
	return "filters unavailable: the cluster's filter store does not answer; try again"
}
func (storeDownError) ErrorCode() int { return jrpc.CodeInternal }
