package keyspace

import "testing"

func TestKeys(t *testing.T) {
	tests := []struct {
		give string
		want Chain
	}{
		{give: "mainnet", want: Chain{Lease: "venn:{mainnet}:leader", Epoch: "venn:{mainnet}:epoch",
			State: "venn:{mainnet}:state", Canon: "venn:{mainnet}:canon", Events: "venn:{mainnet}:events",
			BlockPrefix: "venn:{mainnet}:blk:", Headers: "venn:{mainnet}:headers", Cordons: "venn:{mainnet}:cordons", CordonsNotify: "venn:{mainnet}:cordons:changed",
			Heads: "venn:{mainnet}:heads", HeadsNotify: "venn:{mainnet}:heads:changed",
			CachePrefix: "venn:{mainnet}:c:", CacheClaimPrefix: "venn:{mainnet}:cc:", CacheSizePrefix: "venn:{mainnet}:cn:",
			CachePurged: "venn:{mainnet}:cache:purged",
			Avail:       "venn:{mainnet}:avail", AvailClaimPrefix: "venn:{mainnet}:availc:",
			FilterPrefix: "venn:{mainnet}:f:", Filters: "venn:{mainnet}:filters", FilterOwnerPrefix: "venn:{mainnet}:fo:",
			PendingPrefix: "venn:{mainnet}:ptx:", PendingSeenPrefix: "venn:{mainnet}:ptxs:"}},
		{give: "base-sepolia", want: Chain{Lease: "venn:{base-sepolia}:leader", Epoch: "venn:{base-sepolia}:epoch",
			State: "venn:{base-sepolia}:state", Canon: "venn:{base-sepolia}:canon", Events: "venn:{base-sepolia}:events",
			BlockPrefix: "venn:{base-sepolia}:blk:", Headers: "venn:{base-sepolia}:headers", Cordons: "venn:{base-sepolia}:cordons",
			CordonsNotify: "venn:{base-sepolia}:cordons:changed",
			Heads:         "venn:{base-sepolia}:heads", HeadsNotify: "venn:{base-sepolia}:heads:changed",
			CachePrefix: "venn:{base-sepolia}:c:", CacheClaimPrefix: "venn:{base-sepolia}:cc:", CacheSizePrefix: "venn:{base-sepolia}:cn:",
			CachePurged: "venn:{base-sepolia}:cache:purged",
			Avail:       "venn:{base-sepolia}:avail", AvailClaimPrefix: "venn:{base-sepolia}:availc:",
			FilterPrefix: "venn:{base-sepolia}:f:", Filters: "venn:{base-sepolia}:filters", FilterOwnerPrefix: "venn:{base-sepolia}:fo:",
			PendingPrefix: "venn:{base-sepolia}:ptx:", PendingSeenPrefix: "venn:{base-sepolia}:ptxs:"}},
	}
	for _, tt := range tests {
		if got := For(tt.give); got != tt.want {
			t.Errorf("For(%q) = %+v, want %+v", tt.give, got, tt.want)
		}
	}
	// The lease and the publish script are fenced by one key.
	c := For("mainnet")
	if c.LeaseKeys()[1] != c.Epoch || c.PublishKeys()[0] != c.Epoch {
		t.Errorf("LeaseKeys %v and PublishKeys %v do not share the epoch %s", c.LeaseKeys(), c.PublishKeys(), c.Epoch)
	}
}
