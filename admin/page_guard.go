package admin

import (
	"net/http"
	"sync"
	"time"
)

// The page's flash line after an action: the redirect names a code, never
// text, so a link cannot make the page say what its author chose.
var flashes = map[string]string{
	"cordoned":    "cordoned",
	"held":        "cordon stored but held back: it is the chain's last remote in rotation",
	"uncordoned":  "uncordoned",
	"refused":     "refused: check the reason (at most 200 bytes) and the duration",
	"not-found":   "no such chain or remote",
	"store-down":  "failed: the cordon store is unavailable",
	"wrong-token": "wrong token",
	"throttled":   "too many failed sign-ins: wait a minute",
}

// flashText is the flash line of code, naming remote when it is one of
// the chain c shows; "" for an unknown code.
func flashText(code, remote string, c *ChainView) string {
	msg, ok := flashes[code]
	if !ok {
		return ""
	}
	if c != nil {
		for _, r := range c.Remotes {
			if r.Name == remote {
				return remote + ": " + msg
			}
		}
	}
	return msg
}

// flashOf is the flash code of an action's outcome.
func flashOf(action string, held bool, aerr *actionError) string {
	switch {
	case aerr == nil && action == actionUncordon:
		return "uncordoned"
	case aerr == nil && held:
		return "held"
	case aerr == nil:
		return "cordoned"
	case aerr.code == http.StatusNotFound:
		return "not-found"
	case aerr.code == http.StatusBadRequest:
		return "refused"
	}
	return "store-down"
}

// Failed sign-ins: at most signinFailures in a signinWindow, for the
// process; then every sign-in waits for the window's end. Tokens are long
// enough that this only keeps the log and the CPU quiet.
const (
	signinFailures = 10
	signinWindow   = time.Minute
)

// signinThrottle counts failed sign-ins in fixed windows.
type signinThrottle struct {
	mu     sync.Mutex
	start  time.Time
	failed int
}

// allowed reports whether a sign-in may be tried at now.
func (s *signinThrottle) allowed(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.start) >= signinWindow {
		s.start, s.failed = now, 0
	}
	return s.failed < signinFailures
}

// fail counts a failed sign-in.
func (s *signinThrottle) fail() {
	s.mu.Lock()
	s.failed++
	s.mu.Unlock()
}
