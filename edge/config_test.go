package edge

import (
	"strings"
	"testing"
)

// on_redis_error decodes itself: open, closed, or "" for the default;
// anything else is refused with the value named.
func TestRedisErrorPolicyText(t *testing.T) {
	for _, give := range []string{"", "open", "closed"} {
		var r RedisErrorPolicy
		if err := r.UnmarshalText([]byte(give)); err != nil || string(r) != give {
			t.Errorf("UnmarshalText(%q) = %q, %v", give, r, err)
		}
	}
	var r RedisErrorPolicy = RedisErrorClosed
	err := r.UnmarshalText([]byte("maybe"))
	if err == nil || err.Error() != `must be open or closed, not "maybe"` || r != RedisErrorClosed {
		t.Errorf("UnmarshalText(maybe) = %q, %v", r, err)
	}
	if got := (Config{}).WithDefaults().RateLimits.OnRedisError; got != RedisErrorOpen {
		t.Errorf("default = %q, want open", got)
	}
	// A Config built in code is checked by Validate.
	c := Config{}.WithDefaults()
	c.RateLimits.OnRedisError = "maybe"
	if err := c.Validate(nil); err == nil || !strings.Contains(err.Error(), `rate_limits.on_redis_error: must be open or closed, not "maybe"`) {
		t.Errorf("Validate = %v", err)
	}
}
