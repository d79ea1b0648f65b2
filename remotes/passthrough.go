package remotes

import "github.com/venn-gateway/venn/remotes/wire"

// Header passthrough (wire.Forwarding): its configuration.

// forwardingOf is rc's forwarding (its chain's folded in by reconfig.go);
// nil: nothing is forwarded.
func forwardingOf(rc Config) *wire.Forwarding {
	return wire.NewForwarding(rc.ForwardHeaders, rc.ForwardClientIP)
}
