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
	switch {
	case sv.note != nil:
		writeNote(h, sv.note)
	case sv.batch:
		writeSummary(h, sv.items)
	}
	h.Set(durationHeader, strconv.FormatFloat(float64(took.Microseconds())/1000, 'f', -1, 64))
}

// writeNote sets the headers of a single call's answer.
func writeNote(h http.Header, n *Note) {
	word := n.Cache
	if word == "" {
		word = "none"
	}
	h.Set(cacheHeader, word)
	if n.Source != "" {
		h.Set(sourceHeader, n.Source)
	}
	if n.Remote != "" {
		h.Set(remoteHeader, n.Remote)
	}
	h.Set(attemptsHeader, strconv.Itoa(n.Attempts))
}

// writeSummary sets a batch's headers: the calls each part answered (calls
// no part answered, refused or invalid ones, are not listed) and the
// upstream attempts of all of them.
func writeSummary(h http.Header, items []item) {
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
		h.Set(sourcesHeader, b.String())
	}
	h.Set(attemptsHeader, strconv.Itoa(attempts))
}
