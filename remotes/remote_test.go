package remotes

import (
	"fmt"
	"testing"
	"time"

	"github.com/venn-gateway/venn/jrpc"
)

// The unsupported-method table stays bounded and keeps learning when full:
// junk method names from clients must not crowd out real ones.
func TestUnsupportedTableBounded(t *testing.T) {
	r := &Remote{unsupported: map[string]unsupportedEntry{}, now: time.Now}
	lacking := &UpstreamError{Remote: "a", Err: &jrpc.Error{Code: -32601, Message: "no such method"}}
	for i := range maxUnsupportedKnown + 100 {
		r.markUnsupported(fmt.Sprintf("junk_%d", i), lacking)
	}
	r.markUnsupported("trace_block", lacking)
	if n := len(r.unsupported); n > maxUnsupportedKnown {
		t.Fatalf("%d entries, want at most %d", n, maxUnsupportedKnown)
	}
	if r.lacks("trace_block") == nil {
		t.Fatal("a full table forgot the newest unsupported method")
	}
}

// Filter ids stick to the remote that made them, until uninstalled or idle
// past the TTL.
func TestFilterTable(t *testing.T) {
	ft := newFilterTable()
	a := &Remote{}
	now := time.Now()
	ft.put("0x1", a, now)
	if ft.get("0x1", now.Add(filterTTL/2)) != a {
		t.Fatal("a live filter lost its remote")
	}
	if ft.get("0x1", now.Add(filterTTL/2+filterTTL-time.Second)) != a {
		t.Fatal("use did not extend the filter's life")
	}
	ft.remove("0x1")
	if ft.get("0x1", now) != nil {
		t.Fatal("an uninstalled filter is still routed")
	}
	ft.put("0x2", a, now)
	if ft.get("0x2", now.Add(filterTTL+time.Second)) != nil {
		t.Fatal("an idle filter outlived its TTL")
	}
}
