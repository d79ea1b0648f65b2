// Package freeport picks loopback TCP ports for the servers that tests and
// benchmarks start as processes (venn replicas, geth, redis-server), which
// must be told their port before they bind it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port Ports picks: above the well-known and most
// registered servers' ports.
const lowest = 10000

// Ports returns n distinct ports on 127.0.0.1 that nobody listened on a
// moment ago. Each is held until all are picked, so they differ. They are
// picked below the kernel's ephemeral range (ip_local_port_range), not
// with ":0": a port the kernel hands out for ":0" is one it also hands to
// outgoing connections, and on a machine running tests in parallel one of
// those took a closed pick before its server bound it. Another process
// picking the same port at the same moment is still possible, if rare:
// callers that can retry, should.
func Ports(n int) ([]int, error) {
	high := ephemeralLow()
	if high-lowest < 1000 {
		return kernelPorts(n)
	}
	ports := make([]int, 0, n)
	for try := 0; len(ports) < n && try < 100*n; try++ {
		p := lowest + rand.IntN(high-lowest)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		defer ln.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("freeport: %d of %d ports found free below %d", len(ports), n, high)
	}
	return ports, nil
}

// Port is Ports(1)'s one port.
func Port() (int, error) {
	ps, err := Ports(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

// kernelPorts is ports the kernel picks, where the range below its
// ephemeral one is too small to pick from.
func kernelPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("freeport: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
