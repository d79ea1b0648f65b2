package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
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
		{name: "defaults", wantCode: -1, want: historyConfig{Blocks: 1_000_000, Contracts: 1000, Range: 10_000, Runs: 100, RemoteRuns: 3,
			Cap: 1000, Latencies: []time.Duration{0, 50 * time.Millisecond}, PG: defaultHistoryPG, DB: historyBenchDB}},
		{name: "set", give: []string{"-blocks", "2000", "-contracts", "10", "-range", "100", "-runs", "3", "-remote-runs", "2",
			"-cap", "100", "-latency", "0s, 20ms", "-db", "x_1", "-keep"},
			wantCode: -1, want: historyConfig{Blocks: 2000, Contracts: 10, Range: 100, Runs: 3, RemoteRuns: 2, Cap: 100,
				Latencies: []time.Duration{0, 20 * time.Millisecond}, PG: defaultHistoryPG, DB: "x_1", Keep: true}},
		{name: "range past the blocks", give: []string{"-blocks", "2000", "-range", "3000"}, wantCode: exitUsage, wantErr: "-range must be in"},
		{name: "more remote runs than runs", give: []string{"-runs", "2", "-remote-runs", "3"}, wantCode: exitUsage, wantErr: "-remote-runs in"},
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
// remotes give the same bytes for every run (it fails otherwise), and the
// report counts the upstream calls of each query: the selective one's 200
// blocks are 2 calls of the 100-block cap, the wide one's 1000 are 10.
func TestHistoryBench(t *testing.T) {
	db := fmt.Sprintf("vennbench_history_test_%d", os.Getpid())
	var stdout, stderr bytes.Buffer
	code := run([]string{"history", "-blocks", "1000", "-contracts", "10", "-range", "200", "-runs", "3", "-remote-runs", "2",
		"-cap", "100", "-latency", "0s,1ms", "-db", db}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code %d\nstdout: %s\nstderr: %s", code, &stdout, &stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`1000 blocks, logs from 10 contracts`),
		regexp.MustCompile(`\| selective: one contract, one event, 200 blocks \| history store \(Postgres\) \|( [0-9.]+ \|){5} 0 \| 1\.0× \|`),
		regexp.MustCompile(`\| selective: one contract, one event, 200 blocks \| remotes, split by the cap, \+1ms per call \|( [0-9.]+ \|){5} 2 \|`),
		regexp.MustCompile(`\| wide: one contract, one event, blocks 1\.\.1000 \| remotes, split by the cap, \+0s per call \|( [0-9.]+ \|){5} 10 \|`),
		regexp.MustCompile(`goal: selective p50 from the store under 20 ms: [0-9.]+ ms, (PASS|FAIL)`),
		regexp.MustCompile(`\| blocks \| 2 \| `), // the range written and the next
		regexp.MustCompile(`bytes per block`),
	} {
		if !want.MatchString(stdout.String()) {
			t.Errorf("report does not match %s:\n%s", want, &stdout)
		}
	}
}
