package remotes

import "github.com/venn-gateway/venn/remotes/wire"

// Header passthrough (wire.Forwarding): its configuration.

func validateForward(p *problems, names []string) {
	for _, h := range names {
		switch {
		case !headerNameRE.MatchString(h):
			p.add("forward_headers", "%q is not a valid header name", h)
		case wire.NeverForwarded(h):
			p.add("forward_headers", "%q is never forwarded (credentials, the connection's own, or set by venn)", h)
		default:
			continue
		}
	}
}

// forwardingOf is rc's forwarding (its chain's folded in by reconfig.go);
// nil: nothing is forwarded.
func forwardingOf(rc Config) *wire.Forwarding {
	return wire.NewForwarding(rc.ForwardHeaders, rc.ForwardClientIP)
}
