package settings

import (
	"strings"
	"testing"
	"time"
)

func TestTierText(t *testing.T) {
	for _, tier := range []Tier{TierPrimary, TierSecondary, TierFallback} {
		b, err := tier.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Tier
		if err := got.UnmarshalText(b); err != nil || got != tier {
			t.Errorf("%s: round trip = %v, %v", tier, got, err)
		}
	}
	var got Tier
	if err := got.UnmarshalText([]byte("gold")); err == nil || !strings.Contains(err.Error(), `unknown tier "gold"`) {
		t.Errorf("gold: err = %v", err)
	}
	if _, err := Tier(9).MarshalText(); err == nil {
		t.Error("tier 9 marshals")
	}
}

// A remote's defaults fit the chain's call deadline, and Validate names
// each field relative to the remote without quoting its URL.
func TestRemoteConfigDefaultsAndValidate(t *testing.T) {
	c := Config{Name: "a", URL: "http://h/KEY123", RateLimit: RateLimit{RPS: 2.5}}.WithDefaults(4 * time.Second)
	if c.Timeout != 2*time.Second || c.MaxInFlight != DefaultMaxInFlight || c.RateLimit.Burst != 3 {
		t.Errorf("defaults = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	bad := Config{Name: "a b", URL: "ftp://KEY123@h", RateLimit: RateLimit{Burst: -1}, Timeout: -1}.WithDefaults(0)
	err := bad.Validate()
	for _, want := range []string{"name: must match", "url: must be http(s):// or ws(s)://", "rate_limit.burst: must be >= 0", "timeout: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "KEY123") {
		t.Errorf("the URL reached a message: %v", err)
	}
}
