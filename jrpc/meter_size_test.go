package jrpc

import (
	"testing"
	"unsafe"
)

// TestHTTPRequestSize: a gated POST's one allocation stays in the 240-byte
// size class; growing AnswerHeader's room past it costs every such request
// 16 bytes more (the next class), which the garbage collector pays for.
func TestHTTPRequestSize(t *testing.T) {
	if n := unsafe.Sizeof(httpRequest{}); n > 240 {
		t.Errorf("httpRequest is %d bytes, over 240", n)
	}
}
