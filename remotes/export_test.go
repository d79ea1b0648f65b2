package remotes

import "time"

// Functions only the tests call.

// LastGoodCheck is the time of r's last good check (zero: none yet).
func (r *Remote) LastGoodCheck() time.Time {
	if g := r.goodAt.Load(); g != 0 {
		return time.Unix(0, g)
	}
	return time.Time{}
}
