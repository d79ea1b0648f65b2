package app

import (
	"fmt"
	"net/http"
)

// What crosses the edge besides calls (docs/edge.md): the checks that
// span sections. Compression is package jrpc's, static answers package
// router's, header passthrough package remotes'.

// validateCrossing refuses a forward_headers entry that names the
// configured key header: venn's own credentials never reach a remote.
func (c *Config) validateCrossing(p *problems) {
	key := http.CanonicalHeaderKey(c.Edge.Auth.Header)
	for i, ch := range c.Chains {
		for _, h := range ch.Pool.ForwardHeaders {
			if http.CanonicalHeaderKey(h) == key {
				p.add(fmt.Sprintf("chains[%d].forward_headers", i), "%q is auth.header: venn's keys are never forwarded", h)
			}
		}
		for j, r := range ch.Remotes {
			for _, h := range r.ForwardHeaders {
				if http.CanonicalHeaderKey(h) == key {
					p.add(fmt.Sprintf("chains[%d].remotes[%d].forward_headers", i, j), "%q is auth.header: venn's keys are never forwarded", h)
				}
			}
		}
	}
}
