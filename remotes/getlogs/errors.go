package getlogs

import (
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// TooLarge: a remote refused an eth_getLogs span as too large (or with too
// many results). Span is the span it suggested, 0 if it said none; Err is
// the remote's own error.
type TooLarge struct {
	Span   uint64
	Reason verdict.Reason
	Err    error
}

func (e *TooLarge) Error() string { return e.Err.Error() }
func (e *TooLarge) Unwrap() error { return e.Err }

// LimitError: a split broke one of its bounds (-32052).
type LimitError struct{ msg string }

func (e *LimitError) Error() string  { return e.msg }
func (e *LimitError) ErrorCode() int { return jrpc.CodeLimitExceeded }

// TimeoutError: the call's deadline passed while it was split (-32051).
type TimeoutError struct{ msg string }

func (e *TimeoutError) Error() string  { return e.msg }
func (e *TimeoutError) ErrorCode() int { return jrpc.CodeTimeout }

// Helps reports whether a smaller block range can cure a too-large answer
// to eth_getLogs. Too many addresses or topics, or a request or batch over
// the remote's size cap, stay as large however the range is cut.
func Helps(r verdict.Reason) bool {
	switch r {
	case verdict.ReasonRangeTooLarge, verdict.ReasonTooManyResults, verdict.ReasonResponseTooLarge:
		return true
	}
	return false
}
