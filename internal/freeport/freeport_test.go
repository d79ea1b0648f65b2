package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPortsAreFreeDistinctAndNotEphemeral: every port binds, none twice,
// and none is one the kernel would give an outgoing connection.
func TestPortsAreFreeDistinctAndNotEphemeral(t *testing.T) {
	ports, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	high := ephemeralLow()
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d picked twice", p)
		}
		seen[p] = true
		if high-lowest >= 1000 && (p < lowest || p >= high) {
			t.Errorf("port %d outside [%d, %d)", p, lowest, high)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d does not bind: %v", p, err)
			continue
		}
		ln.Close()
	}
}
