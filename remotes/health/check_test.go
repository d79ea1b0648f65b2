package health

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

type count struct{ n float64 }

func (c *count) Inc()          { c.n++ }
func (c *count) Set(v float64) { c.n = v }

func newCheck() (*Check, *count, *count, *count, *count) {
	var ok, wrong, failed, gauge count
	c := &Check{}
	c.Init(slog.New(slog.NewTextHandler(io.Discard, nil)), &ok, &wrong, &failed, &gauge)
	return c, &ok, &wrong, &failed, &gauge
}

func TestCheckStates(t *testing.T) {
	c, ok, wrong, _, gauge := newCheck()
	now := time.Unix(1000, 0)
	if !c.Due(now) || c.Verified() {
		t.Fatal("a new check is due and not verified")
	}
	if d, brisk := c.Retry(12*time.Second, time.Hour); !brisk || d != RetryEvery {
		t.Fatalf("unknown: retry %v %v, want %v brisk", d, brisk, RetryEvery)
	}
	if was, on := c.Checked(1, 2, now); on || was != Unknown || c.State() != Wrong || wrong.n != 1 || gauge.n != 1 {
		t.Fatalf("wrong answer: was %v on %v state %v", was, on, c.State())
	}
	if was, on := c.Checked(1, 1, now); !on || was != Wrong || !c.Verified() || ok.n != 1 || gauge.n != 0 {
		t.Fatalf("right answer: was %v on %v state %v", was, on, c.State())
	}
	if c.Due(now.Add(time.Second)) || !c.Due(now.Add(DefaultChainRecheck)) {
		t.Fatal("a verified check is due every ChainRecheck")
	}
	if _, brisk := c.Retry(12*time.Second, time.Hour); brisk {
		t.Fatal("a verified check is not retried briskly")
	}
	if !c.Unsure("breaker opened") || c.State() != Stale || c.Unsure("again") {
		t.Fatal("Unsure takes a verified remote out once")
	}
	if d, _ := c.Retry(12*time.Second, time.Second); d != time.Second {
		t.Fatalf("stale: retry %v, want the breaker's cooldown", d)
	}
	select {
	case <-c.Kicked():
	default:
		t.Fatal("Unsure asks for a check now")
	}
}

func TestCheckDoubts(t *testing.T) {
	c, _, _, failed, _ := newCheck()
	now := time.Unix(1000, 0)
	c.Checked(1, 1, now)
	c.Reconnected()
	if c.HeadsTrusted() || !c.Due(now) || c.OwnDue(true, now) != true {
		t.Fatal("a reconnected stream's heads wait for a check, fed or not")
	}
	c.Checked(1, 1, now)
	if !c.HeadsTrusted() || c.OwnDue(true, now.Add(DefaultChainRecheck)) {
		t.Fatal("a fed remote's recheck is the leader's")
	}
	c.HeadMoved(100, 100+200, now.Add(time.Second))
	if c.Due(now.Add(time.Second)) {
		t.Fatal("a head jump right after a check asks for none")
	}
	c.HeadMoved(100, 100+10, now.Add(time.Minute/2))
	if c.Due(now.Add(time.Minute / 2)) {
		t.Fatal("a step within a reorg's reach asks for no check")
	}
	c.HeadMoved(100, 100+200, now.Add(time.Minute/2))
	if !c.Due(now.Add(time.Minute / 2)) {
		t.Fatal("a head jump asks for a check")
	}
	c.Failed("check failed", errors.New("down"), now)
	c.Failed("check failed", errors.New("down"), now.Add(time.Second))
	if failed.n != 2 || c.warnedAt.Load() != now.UnixNano() {
		t.Fatalf("failed %v, warned at %v: want each counted, one warning a minute", failed.n, c.warnedAt.Load())
	}
}
