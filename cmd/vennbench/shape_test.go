package main

import (
	"bytes"
	"testing"
)

func TestParseShapeFlags(t *testing.T) {
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantShapes int
	}{
		{name: "defaults", wantCode: -1, wantShapes: 4},
		{name: "one", give: []string{"-shapes", "l2", "-remotes", "ws", "-duration", "5s"}, wantCode: -1, wantShapes: 1},
		{name: "unknown shape", give: []string{"-shapes", "solana"}, wantCode: exitUsage},
		{name: "unknown remote", give: []string{"-remotes", "grpc"}, wantCode: exitUsage},
		{name: "no duration", give: []string{"-duration", "0s"}, wantCode: exitUsage},
		{name: "help", give: []string{"-h"}, wantCode: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, code := parseShapeFlags(tt.give, &stderr)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
			if code < 0 && len(cfg.Shapes) != tt.wantShapes {
				t.Errorf("%d shapes, want %d", len(cfg.Shapes), tt.wantShapes)
			}
		})
	}
}
