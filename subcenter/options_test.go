package subcenter

import "testing"

// The limits section's subscription and filter limits reach the Center's
// options, each from the limit of its name.
func TestLimitOptions(t *testing.T) {
	l := Limits{MaxSubscriptions: 1, SubscriptionQueue: 2, SubscriptionQueueBytes: 3,
		MaxFilterAddresses: 4, MaxFilterTopics: 5, MaxFilterBytes: 6}
	want := Options{MaxPerConn: 1, QueueLen: 2, QueueBytes: 3, MaxAddresses: 4, MaxTopics: 5, MaxFilterBytes: 6}
	if got := LimitOptions(l); got != want {
		t.Errorf("LimitOptions = %+v, want %+v", got, want)
	}
}
