// Package testkit holds what venn's tests share to wait for events without
// sleeping for them: polling a condition until a deadline, and a buffer
// concurrent loggers write to while a test reads it. It imports nothing of
// the project. WSWrite and WSRead are one bounded WebSocket write and
// read; Redis is a client of the machine's Redis whose keys are cleaned up,
// RedisServer a private redis-server a test can stop and restart empty,
// ClosedAddr an address nothing listens on; EditJSON changes one field of
// an answer; Series counts a registry's series with some labels; ServeTCP
// serves a raw listener's connections and stops them all; RecvUntil
// reads a stream until the message awaited.
package testkit

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// Poll pauses between calls of cond: short at first, so a change is seen
// at once, then longer, so a slow condition (an HTTP call to a cluster)
// does not hammer a busy machine.
const (
	firstPause = time.Millisecond
	maxPause   = 25 * time.Millisecond
)

// Poll calls cond until it holds, and reports whether it did before within
// passed.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := firstPause
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause) // the poll's interval, not a wait for state
		pause = min(2*pause, maxPause)
	}
}

// WaitFor polls cond until it holds, and fails t, naming what it waited
// for, when it does not within the given time.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("not within %v: %s", within, what)
	}
}

// Buffer collects what concurrent writers (loggers, a child's output)
// write, for a test to read while they go on.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Count is how many times s was written so far.
func (b *Buffer) Count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// EditJSON decodes raw into a T, lets fn change it and encodes it again:
// one field of an upstream answer changed, the rest as it was.
func EditJSON[T any](t testing.TB, raw json.RawMessage, fn func(T)) json.RawMessage {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	fn(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
