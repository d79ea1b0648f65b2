package fielderr

import (
	"errors"
	"testing"
)

// TestList: each problem names its field; another section's problems are
// nested under its prefix one by one.
func TestList(t *testing.T) {
	var inner List
	inner.Add("max", "must be at most %d", 3)
	inner.Negative("delay", true)
	inner.Negative("quantile", false)

	var l List
	l.Add("url", "required")
	l.Under("hedge", inner.Err())
	l.Under("", errors.New("budget: needs calls or units per period"))
	l.Under("scoring", nil)
	want := "url: required\nhedge.max: must be at most 3\nhedge.delay: must be positive\nbudget: needs calls or units per period"
	if err := l.Err(); err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if err := (List{}).Err(); err != nil {
		t.Errorf("no problems: %v", err)
	}
}
