package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/testkit"
)

// venn tenants writes, lists and deletes the tenants and keys kept in
// Redis, refusing an entry the config file would refuse before writing
// anything, and never printing a key's secret.
func TestTenantsCommand(t *testing.T) {
	_, token := testkit.Redis(t, func(token string) string { return "venn:{scopes-" + token + "}*" })
	cfg := writeFile(t, "redis: {url: \"redis://"+testkit.RedisAddr+"/0\"}\n"+
		"auth: {redis: {enabled: true, tag: scopes-"+token+"}}\n"+
		"chains: [{name: eth, chain_id: 1, remotes: [{name: a, url: \"http://127.0.0.1:1\"}]}]\n")
	const secret = "cli-secret-0123456789"
	tenants := func(stdin string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := tenantsCmd(append([]string{"--config", cfg}, args...), strings.NewReader(stdin), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	steps := []struct {
		stdin      string
		args       []string
		wantCode   int
		wantOut    string // in stdout, or stderr when the code is not 0
		wantAbsent string
	}{
		{stdin: "name: team-a\nchains: [sol]\n", args: []string{"put-tenant", "-"}, wantCode: exitError, wantOut: `chains[0]: "sol" is not a configured chain`},
		{stdin: "name: team-a\nchains: [eth]\nmethods: [eth_call]\ncredits: {per_minute: 100}\n", args: []string{"put-tenant", "-"}, wantOut: "tenant team-a written"},
		{stdin: `{"name": "k1", "key": "short", "tenant": "team-a"}`, args: []string{"put-key", "-"}, wantCode: exitError, wantOut: "at least 16", wantAbsent: "short"},
		{stdin: `{"name": "k1", "key": "` + secret + `", "tenant": "nobody"}`, args: []string{"put-key", "-"}, wantCode: exitError, wantOut: `"nobody" is not among tenants`},
		{stdin: `{"name": "k1", "key": "` + secret + `", "tenant": "team-a"}`, args: []string{"put-key", "-"}, wantOut: "key k1 written"},
		{args: []string{"list"}, wantOut: "key_sha256: ", wantAbsent: secret},
		{args: []string{"delete-key", "k1"}, wantOut: "key k1 deleted"},
		{args: []string{"delete-key", "k1"}, wantCode: exitError, wantOut: `no stored key "k1"`},
		{args: []string{"frobnicate"}, wantCode: exitUsage, wantOut: "want list"},
	}
	for i, s := range steps {
		code, stdout, stderr := tenants(s.stdin, s.args...)
		out := stdout
		if s.wantCode != exitOK {
			out = stderr
		}
		if code != s.wantCode || !strings.Contains(out, s.wantOut) || (s.wantAbsent != "" && strings.Contains(stdout+stderr, s.wantAbsent)) {
			t.Errorf("step %d %v: code %d\nstdout: %s\nstderr: %s\nwant code %d, %q, without %q", i, s.args, code, stdout, stderr, s.wantCode, s.wantOut, s.wantAbsent)
		}
	}
}
