package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestStatus starts venn in front of a fake node and a dead remote, and
// prints its overview with venn status: both remotes, one in rotation and
// one out with its reason, and no secret; a wrong token is refused.
func TestStatus(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	addr := testkit.ClosedAddr(t)
	const token = "status-token-0123456789"
	cfg, err := app.Parse([]byte(`
listen: 127.0.0.1:0
metrics_listen: ""
admin_listen: ` + addr + `
admin: {tokens: [{name: ops, token: ` + token + `}]}
chains:
  - name: test
    chain_id: 1337
    remotes:
      - {name: good, url: "` + node.URL() + `/SECRETKEY"}
      - {name: dead, url: "http://` + testkit.ClosedAddr(t) + `/SECRETKEY", tier: fallback, timeout: 300ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	fx := app.New(cfg, app.LogOutput(io.Discard), app.WithBuild(app.BuildInfo{Version: "v9.9.9"}))
	if err := fx.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Stop(context.Background()) })

	url := "http://" + addr
	var stdout, stderr bytes.Buffer
	testkit.WaitFor(t, 5*time.Second, "venn status shows the dead remote out", func() bool {
		stdout.Reset()
		stderr.Reset()
		return run([]string{"status", "--admin", url, "--token", token}, &stdout, &stderr) == exitOK &&
			strings.Contains(stdout.String(), "chain id not verified")
	})
	out := stdout.String()
	for _, want := range []string{"venn v9.9.9", "test  /test  ready", "leader", "REMOTE", "good", "primary", "in",
		"dead", "fallback", "out"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SECRETKEY") || strings.Contains(out, "127.0.0.1") {
		t.Errorf("status shows a URL or an address:\n%s", out)
	}
	t.Setenv("VENN_ADMIN_TOKEN", "wrong-token-0123456789")
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"status", "--admin", url}, &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "401") {
		t.Errorf("wrong token: exit %d, stderr %q", code, stderr.String())
	}
}
