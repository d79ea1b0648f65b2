package router

import "github.com/venn-gateway/venn/jrpc"

// The router's own answers to a call it refused. Each says why in the
// words a client gets (geth's, where geth has them) and carries its
// JSON-RPC code (ErrorCode); jrpc.ToWire is the one place they become wire
// errors. Static answers (static.go) are wire errors as configured.

// limitError: a client's eth_getLogs or filter over getlogs_limits
// (-32052).
type limitError struct{ msg string }

func (e *limitError) Error() string  { return e.msg }
func (e *limitError) ErrorCode() int { return jrpc.CodeLimitExceeded }

// notificationsError is geth's answer to eth_subscribe where notifications
// cannot be delivered (-32601).
type notificationsError struct{}

func (notificationsError) Error() string  { return "notifications not supported" }
func (notificationsError) ErrorCode() int { return jrpc.CodeMethodNotFound }

var errNotifications error = notificationsError{}

// floorError: a call's floor (jrpc.MinHead) names a tag whose number the
// cluster does not know yet (-32050: no source can be said to reach it).
type floorError struct{ msg string }

func (e *floorError) Error() string  { return e.msg }
func (e *floorError) ErrorCode() int { return jrpc.CodeNoRemote }
