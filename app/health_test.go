package app

import (
	"strings"
	"testing"

	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/status"
)

// /readyz takes no token: a 503's reason names remotes and reason codes,
// never a cordon's free text or the token's name.
func TestNotReadyReasonShowsCodesOnly(t *testing.T) {
	got := notReadyReason([]remotes.RemoteStatus{
		{Name: "a", Out: []remotes.OutReason{{Code: status.OutCordoned, Text: "cordoned by alice: vendor ticket 4411"}}},
		{Name: "b", Out: []remotes.OutReason{{Code: status.OutLagging, Text: "lagging 12 blocks"}}},
	})
	if want := "no remote in rotation: a: cordoned; b: lagging"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if strings.Contains(got, "alice") || strings.Contains(got, "4411") {
		t.Errorf("reason %q shows the cordon's text", got)
	}
}
