//go:build linux

package hostile

import "testing"

// The harness's own check: with nothing broken, every replica answers as
// the node does, the leader and a follower alike. A hostile test that
// fails its final check fails for what it broke, not for the checker.
func TestQuietWorldAnswersAsTheNode(t *testing.T) {
	w := startWorld(t, options{})
	stop := w.mine(t)
	w.waitServing(t, w.replicas)
	stop()
	w.waitServing(t, w.replicas)
	for _, r := range w.replicas {
		checkAnswers(t, r, w.nodes[0])
	}
}
