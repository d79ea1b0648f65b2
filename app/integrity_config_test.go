package app

import (
	"strings"
	"testing"
)

func TestIntegrityConfig(t *testing.T) {
	const chain = `
chains:
  - name: ethereum
    chain_id: 1
    remotes:
      - {name: a, url: "http://127.0.0.1:1"}
`
	tests := []struct {
		name        string
		give        string
		wantStalker bool
		wantClient  bool
		wantErr     string
	}{
		{name: "defaults: the stalker's fetches, not client calls", give: chain, wantStalker: true},
		{name: "stalker off", give: chain + "    integrity: {stalker: false}\n"},
		{name: "client calls on", give: chain + "    integrity: {client_calls: true}\n", wantStalker: true, wantClient: true},
		{name: "both set", give: chain + "    integrity: {stalker: true, client_calls: true}\n", wantStalker: true, wantClient: true},
		{name: "unknown member", give: chain + "    integrity: {receipts: true}\n", wantErr: "receipts"},
		{name: "not a bool", give: chain + "    integrity: {stalker: sometimes}\n", wantErr: "sometimes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.give))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ic := cfg.Chains[0].Integrity
			if ic.Stalker == nil || *ic.Stalker != tt.wantStalker || ic.StalkerOn() != tt.wantStalker || ic.ClientCalls != tt.wantClient {
				t.Errorf("integrity = {stalker: %v (on %v), client_calls: %v}, want {%v, %v}",
					ic.Stalker, ic.StalkerOn(), ic.ClientCalls, tt.wantStalker, tt.wantClient)
			}
		})
	}
	if !(IntegrityConfig{}).StalkerOn() {
		t.Error("an unset stalker flag is not on")
	}
}
