package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestParseNATSFlags(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantCode int
	}{
		{name: "defaults", give: nil, wantCode: -1},
		{name: "one call", give: []string{"-calls", "chainId", "-conc", "1"}, wantCode: -1},
		{name: "bad call", give: []string{"-calls", "eth_call"}, wantCode: exitUsage},
		{name: "zero rounds", give: []string{"-rounds", "0"}, wantCode: exitUsage},
		{name: "extra arg", give: []string{"now"}, wantCode: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, code := parseNATSFlags(tt.give, io.Discard); code != tt.wantCode {
				t.Fatalf("code %d, want %d", code, tt.wantCode)
			}
		})
	}
}

// A short run of the NATS mode answers every call over both transports,
// reports both with the nats-server's CPU, and leaves no child running.
func TestNATSBench(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	bin := vennBinary(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"nats", "-venn", bin,
		"-duration", "300ms", "-warmup", "100ms", "-rounds", "2", "-conc", "1,4", "-calls", "chainId,balance",
	}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, call := range []string{"chainId", "balance"} {
		for _, conc := range []string{"1", "4"} {
			for _, tr := range []string{"http", "nats"} {
				f := tableRow(t, out, "| "+call+" | "+tr+" | "+conc+" |")
				if v := cellFloat(t, f, 3); v <= 0 {
					t.Errorf("%s over %s at c=%s: %v req/s", call, tr, conc, v)
				}
				if f[8] != "0" {
					t.Errorf("%s over %s at c=%s: errors %s", call, tr, conc, f[8])
				}
			}
			if !strings.Contains(out, "| "+call+" | "+conc+" | ") {
				t.Errorf("no ratio row for %s at c=%s:\n%s", call, conc, out)
			}
		}
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}
