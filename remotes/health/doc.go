// Package health is a remote's chain id check as a state that needs no
// remote (Check): what the checks found (State), when the chain id must
// be asked again (Due, Retry), what an answer or its absence means
// (Checked, Failed), and the doubts that ask for a check now (Unsure,
// Soon, Reconnected, HeadMoved).
//
// It owns that state and its log lines and nothing else. It knows no Pool
// or Remote and sends no call: remotes.Remote holds a Check, asks the
// chain id when the Check says, and acts on the answer (its rotation, its
// last error, the distrust of its answers).
package health
