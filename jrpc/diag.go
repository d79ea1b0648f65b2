package jrpc

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Diagnostic headers say how venn answered an HTTP request, for a client or
// an operator chasing one call (Options.DiagnosticHeaders). A single call's
// answer says which part answered, the remote (by name, never its URL), the
// upstream attempts, the response cache's word and the time venn took; a
// batch's says how many calls each part answered and the attempts of all.
// Every value is bounded: sources from a fixed set, remotes from the
// chain's configuration.
const (
	cacheHeader    = "X-Venn-Cache"
	sourceHeader   = "X-Venn-Source"
	remoteHeader   = "X-Venn-Remote"
	attemptsHeader = "X-Venn-Attempts"
	durationHeader = "X-Venn-Duration-Ms"
	sourcesHeader  = "X-Venn-Sources" // a batch's: head=3,remotes=2
)

// sources are the parts that answer calls, as notes name them, in the
// order a batch's summary lists them.
var sources = [...]string{"head", "history", "cache", "forger", "remotes", "local"}

// writeDiagnostics sets the diagnostic headers of an answer that took
// took to serve: a single call's from its note, a batch's summary from its
// items' notes.
func writeDiagnostics(h http.Header, sv *served, took time.Duration) {
	var d diagHeaders
	switch {
	case sv.note != nil:
		d.note(sv.note)
	case sv.batch:
		d.summary(sv.items)
	}
	d.add(durationHeader, strconv.FormatFloat(float64(took.Microseconds())/1000, 'f', -1, 64))
	d.write(h)
}

// diagHeaders gathers an answer's diagnostic headers, to be set with one
// allocation for all their values rather than one each: they are on every
// answer.
type diagHeaders struct {
	n    int
	keys [5]string
	vals [5]string
}

func (d *diagHeaders) add(k, v string) {
	d.keys[d.n], d.vals[d.n] = k, v
	d.n++
}

func (d *diagHeaders) write(h http.Header) {
	vals := make([]string, d.n)
	copy(vals, d.vals[:d.n])
	for i, k := range d.keys[:d.n] {
		h[k] = vals[i : i+1 : i+1] // the keys are canonical
	}
}

// note adds a single call's headers.
func (d *diagHeaders) note(n *Note) {
	word := n.Cache
	if word == "" {
		word = "none"
	}
	d.add(cacheHeader, word)
	if n.Source != "" {
		d.add(sourceHeader, n.Source)
	}
	if n.Remote != "" {
		d.add(remoteHeader, n.Remote)
	}
	d.add(attemptsHeader, strconv.Itoa(n.Attempts))
}

// summary adds a batch's headers: the calls each part answered (calls no
// part answered, refused or invalid ones, are not listed) and the upstream
// attempts of all of them.
func (d *diagHeaders) summary(items []item) {
	var counts [len(sources)]int
	attempts := 0
	for i := range items {
		n := &items[i].note
		attempts += n.Attempts
		for k, s := range sources {
			if n.Source == s {
				counts[k]++
				break
			}
		}
	}
	var b strings.Builder
	for k, c := range counts {
		if c == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(sources[k])
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(c))
	}
	if b.Len() > 0 {
		d.add(sourcesHeader, b.String())
	}
	d.add(attemptsHeader, strconv.Itoa(attempts))
}
