package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseHistoryFlags(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantCode int
		want     historyConfig
		wantErr  string
	}{
		{name: "defaults", wantCode: -1, want: historyConfig{Blocks: 100_000, Runs: 7, Cap: 1000,
			Latencies: []time.Duration{0, 50 * time.Millisecond}, PG: defaultHistoryPG, DB: historyBenchDB}},
		{name: "set", give: []string{"-blocks", "2000", "-runs", "3", "-cap", "100", "-latency", "0s, 20ms", "-db", "x_1", "-keep"},
			wantCode: -1, want: historyConfig{Blocks: 2000, Runs: 3, Cap: 100,
				Latencies: []time.Duration{0, 20 * time.Millisecond}, PG: defaultHistoryPG, DB: "x_1", Keep: true}},
		{name: "too few blocks", give: []string{"-blocks", "10"}, wantCode: exitUsage, wantErr: "-blocks must be in"},
		{name: "bad latency", give: []string{"-latency", "fast"}, wantCode: exitUsage, wantErr: `"fast" is not a duration`},
		{name: "database name spliced into SQL", give: []string{"-db", "x; DROP"}, wantCode: exitUsage, wantErr: "-db must match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, code := parseHistoryFlags(tt.give, &stderr)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d (%s)", code, tt.wantCode, &stderr)
			}
			if code < 0 && fmt.Sprint(cfg) != fmt.Sprint(tt.want) {
				t.Errorf("config = %+v\nwant %+v", cfg, tt.want)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", &stderr, tt.wantErr)
			}
		})
	}
}

// TestHistoryBench runs the history bench small: the store and the split
// remotes give the same bytes (it fails otherwise), and the report counts
// the upstream calls the store saved.
func TestHistoryBench(t *testing.T) {
	db := fmt.Sprintf("vennbench_history_test_%d", os.Getpid())
	var stdout, stderr bytes.Buffer
	code := run([]string{"history", "-blocks", "1000", "-runs", "2", "-cap", "100", "-latency", "0s,1ms", "-db", db}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code %d\nstdout: %s\nstderr: %s", code, &stdout, &stderr)
	}
	for _, want := range []string{
		"eth_getLogs over blocks 1..1000",
		"| history store (Postgres) |",
		"| remotes, split by the cap, +0s per call |",
		"| remotes, split by the cap, +1ms per call |",
		"upstream calls saved per query: 10\n",
		"| blocks | ",
		"bytes per block",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, &stdout)
		}
	}
}
