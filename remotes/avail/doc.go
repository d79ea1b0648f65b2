// Package avail is what a remote's availability of old data comes to
// without the remote: the windows learnt for each kind of data (Windows:
// the oldest block served, the block below which nothing is, as of which
// head, from the probe or from an answer, and how long an answer's lesson
// holds), the probe's bounded search for the oldest block served (Search,
// with the call that reads each kind: Call), a shared probe's result
// (Probed), and whether the chain wants the probes yet (Wanted).
//
// It owns these computations and nothing else. It knows no Pool or
// Remote and sends no call: remotes (avail.go, avail_probe.go) keeps one
// Windows per remote, says what config states (which wins over anything
// here), asks the remotes the probe's questions, judges their answers,
// shares the results through an AvailShare, and decides selection.
package avail
