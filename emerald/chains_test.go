package emerald

import (
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/emerald/pb"
)

// The table gives Dshackle's codes for the chains the issue names, a
// grpc_id overrides it, and an id it lacks is not served.
func TestRefOf(t *testing.T) {
	for _, tt := range []struct {
		id   uint64
		grpc int32
		want pb.ChainRef
	}{
		{1, 0, 100}, {8453, 0, 1010}, {42161, 0, 1004}, {10, 0, 1005}, {137, 0, 1002},
		{11155111, 0, 10008}, {1337, 0, pb.ChainRef_CHAIN_UNSPECIFIED}, {1337, 100, 100}, {1, 10008, 10008},
	} {
		if got := RefOf(tt.id, tt.grpc); got != tt.want {
			t.Errorf("RefOf(%d, %d) = %v, want %v", tt.id, tt.grpc, got, tt.want)
		}
	}
	for id, ref := range refByChainID {
		if _, ok := pb.ChainRef_name[int32(ref)]; !ok || ref == pb.ChainRef_CHAIN_UNSPECIFIED {
			t.Errorf("chain id %d maps to %d, which the protos do not name", id, ref)
		}
	}
}

// UNAVAILABLE's message names the chains served, and only those.
func TestServedNamesChains(t *testing.T) {
	cs := []Chain{{Name: "eth", ChainID: 1}, {Name: "dev", ChainID: 1337}, {Name: "base", ChainID: 8453}}
	if got, want := served(cs), "CHAIN_BASE__MAINNET (1010, base), CHAIN_ETHEREUM__MAINNET (100, eth)"; got != want {
		t.Fatalf("served = %q, want %q", got, want)
	}
	if got := served(cs[1:2]); got != "none" {
		t.Fatalf("served without a ChainRef = %q", got)
	}
	if _, ok := find(cs, pb.ChainRef_CHAIN_UNSPECIFIED); ok {
		t.Fatal("CHAIN_UNSPECIFIED found a chain")
	}
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.MaxRecvBytes != DefaultMaxRecvBytes || c.Concurrency != DefaultConcurrency || c.StopTimeout != DefaultStopTimeout ||
		c.Keepalive.MinTime != DefaultKeepaliveMinTime || !c.ReflectionOn() {
		t.Fatalf("defaults: %+v", c)
	}
	err := Config{Concurrency: -1, Keepalive: Keepalive{MinTime: -time.Second}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "grpc.concurrency") {
		t.Fatalf("Validate: %v", err)
	}
}
