package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/pgtest"
)

func TestUsageCommand(t *testing.T) {
	url := pgtest.New(t)
	pgtest.Exec(t, url, `INSERT INTO usage_daily VALUES
		('2026-12-01', 'team-a', 'eth', 'eth_call', 10, 200, 1, 5000),
		('2026-12-02', 'team-a', 'eth', 'eth_getLogs', 3, 180, 0, 9000),
		('2026-12-02', 'team-b', 'eth', 'eth_call', 7, 140, 0, 700),
		('2026-12-09', 'team-a', 'eth', 'eth_call', 1, 20, 0, 10)`)
	cfg := writeFile(t, "postgres: {url: \""+url+"\"}\nchains: [{name: eth, chain_id: 1, remotes: [{name: a, url: \"http://127.0.0.1:1\"}]}]\n")
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "csv of one tenant", give: []string{"usage", "--config", cfg, "--tenant", "team-a", "--from", "2026-12-01", "--to", "2026-12-02"},
			wantStdout: "day,tenant,chain,method,calls,credits,errors,bytes_out\n" +
				"2026-12-01,team-a,eth,eth_call,10,200,1,5000\n2026-12-02,team-a,eth,eth_getLogs,3,180,0,9000\n"},
		{name: "json of every tenant", give: []string{"usage", "--config", cfg, "--from", "2026-12-02", "--to", "2026-12-02", "--format", "json"},
			wantStdout: `[
  {
    "day": "2026-12-02",
    "tenant": "team-a",
    "chain": "eth",
    "method": "eth_getLogs",
    "calls": 3,
    "credits": 180,
    "errors": 0,
    "bytes_out": 9000
  },
  {
    "day": "2026-12-02",
    "tenant": "team-b",
    "chain": "eth",
    "method": "eth_call",
    "calls": 7,
    "credits": 140,
    "errors": 0,
    "bytes_out": 700
  }
]
`},
		{name: "a bad date", give: []string{"usage", "--config", cfg, "--from", "yesterday"}, wantCode: exitUsage, wantStderr: "--from"},
		{name: "a bad format", give: []string{"usage", "--config", cfg, "--format", "xml"}, wantCode: exitUsage, wantStderr: "--format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.give, &stdout, &stderr); got != tt.wantCode {
				t.Fatalf("exit code = %d, want %d\nstdout: %s\nstderr: %s", got, tt.wantCode, &stdout, &stderr)
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", &stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want %q", &stderr, tt.wantStderr)
			}
		})
	}
}
