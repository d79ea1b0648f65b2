package admin

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestSetTokens: a reload's tokens take effect at once, for the API and
// the page: a removed token is refused and its page sessions signed out;
// going from tokens to none is refused.
func TestSetTokens(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, "tokens", "solo", nodes, nil, &clock{now: time.Now()})
	c := browser(t)
	resp := pagePost(t, c, r.srv.URL+"/status/login", url.Values{"token": {testToken}, "next": {"/status"}}, r.srv.URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in = %d", resp.StatusCode)
	}
	if code, _ := pageGet(t, c, r.srv.URL+"/status"); code != http.StatusOK {
		t.Fatalf("page after sign-in = %d", code)
	}
	const rotated = "rotated-token-0123456789"
	if !r.admin.SetTokens([]Token{{Name: "bob", Token: rotated}}) {
		t.Fatal("SetTokens refused a rotation")
	}
	if code, _ := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/status", testToken, ""); code != http.StatusUnauthorized {
		t.Errorf("the removed token = %d, want 401", code)
	}
	if code, _ := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/status", rotated, ""); code != http.StatusOK {
		t.Errorf("the new token = %d, want 200", code)
	}
	if code, body := pageGet(t, c, r.srv.URL+"/status"); code != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) {
		t.Errorf("the removed token's page session = %d, want signed out", code)
	}
	if r.admin.SetTokens(nil) {
		t.Error("SetTokens took the API to no tokens")
	}
	if code, _ := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/status", "", ""); code != http.StatusUnauthorized {
		t.Errorf("without a token after a refused SetTokens(nil) = %d, want 401", code)
	}
}
