package ratelimiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A share's bookkeeping, without Redis: 20 permits per 1000 ms.
func newTestShare() *share {
	return &share{interval: 1000, rate: 20}
}

func TestShareHeldExpiresWithRecords(t *testing.T) {
	s := newTestShare()
	if got := s.note(100, 5); got != 5 {
		t.Fatalf("held after a grant of 5: %d", got)
	}
	if got := s.note(600, 3); got != 8 {
		t.Fatalf("held after 5 and 3: %d", got)
	}
	// The script expires a record stamped at or before now less the
	// interval: the grant at 100 is gone at 1100, not at 1099.
	if got := s.heldAt(1099); got != 8 {
		t.Errorf("held at 1099: %d, want 8", got)
	}
	if got := s.note(1100, 0); got != 3 {
		t.Errorf("held at 1100: %d, want 3", got)
	}
	if len(s.marks) != 1 {
		t.Errorf("marks after expiry: %v", s.marks)
	}
}

func TestShareMarksBounded(t *testing.T) {
	s := newTestShare()
	for i := int64(0); i < maxMarks+10; i++ {
		s.note(i/100, 1) // all in one window
	}
	if len(s.marks) > maxMarks {
		t.Fatalf("%d marks, bound %d", len(s.marks), maxMarks)
	}
	if got := s.heldAt(20); got != maxMarks+10 {
		t.Errorf("held %d after merging, want every permit (%d)", got, maxMarks+10)
	}
}

func TestShareYields(t *testing.T) {
	delay := 100 * time.Millisecond
	s := newTestShare()
	s.note(0, 15)
	s.sharedUntil = 3000
	s.others = 5
	if s.yields(10, delay) {
		t.Error("yielded with no refusal: demand may be below the rate")
	}
	s.refused = true
	if !s.yields(10, delay) {
		t.Error("did not yield holding 15 against 5 after a refusal")
	}
	s.others = 15 - s.rate/yieldMargin // ahead by the margin, not over it
	if s.yields(10, delay) {
		t.Errorf("yielded holding 15 against %d, within the margin %d", s.others, s.rate/yieldMargin)
	}
	s.others = 5
	if s.yields(1000, delay) {
		t.Error("yielded once its grants expired")
	}
}

func TestShareProbesWhenAlone(t *testing.T) {
	delay := 100 * time.Millisecond
	s := newTestShare()
	s.note(0, 20)
	s.inWindow = 20
	s.refused = true
	if !s.yields(probeEvery*100, delay) {
		t.Fatal("a lone Client holding the window did not probe")
	}
	if s.probed != probeEvery*100 {
		t.Fatalf("probe at %d not noted (%d)", probeEvery*100, s.probed)
	}
	s.probed = 500
	if s.yields(500+probeEvery*100-1, delay) {
		t.Error("probed twice within probeEvery yield delays")
	}
	if !s.yields(500+probeEvery*100, delay) {
		t.Error("no probe after probeEvery yield delays")
	}
	s.inWindow = 0
	if s.yields(500+3*probeEvery*100, delay) {
		t.Error("probed holding nothing in the window")
	}
}

func TestSharesSwept(t *testing.T) {
	var ls lanes
	for i := 0; i < 1000; i++ {
		ls.newShare(string(rune('a'+i%26))+string(rune(i)), int64(i)) // stale at once: nothing held
	}
	if len(ls.shares) > 100 {
		t.Errorf("%d shares kept of 1000 stale ones", len(ls.shares))
	}
}

func TestDelayedForBounds(t *testing.T) {
	c := NewClient(nil, WithYieldDelay(200*time.Millisecond))
	l := &lane{key: "k"}
	s := c.lanes.newShare("k", 0)
	s.interval, s.rate, s.refused = 60_000, 20, true
	now := time.Now()
	s.note(now.UnixMilli(), 20)
	s.sharedUntil = now.UnixMilli() + 60_000
	q := newRequest(context.Background(), nil, 1, false)
	wake := now.Add(10 * time.Millisecond)
	if got := c.delayedFor(l, q, wake); !got.Equal(wake.Add(200 * time.Millisecond)) {
		t.Errorf("yielded wake at %v after wake, want 200ms", got.Sub(wake))
	}
	q.limit = wake.Add(50 * time.Millisecond)
	if got := c.delayedFor(l, q, wake); got.After(q.limit) {
		t.Errorf("yielded past the caller's limit by %v", got.Sub(q.limit))
	}
	ctx, cancel := context.WithDeadline(context.Background(), wake.Add(100*time.Millisecond))
	defer cancel()
	q = newRequest(ctx, nil, 1, false)
	if got := c.delayedFor(l, q, wake); !got.Equal(wake.Add(50 * time.Millisecond)) {
		t.Errorf("with 100ms to the deadline the wake moved %v, want half-way (50ms)", got.Sub(wake))
	}
}

func TestWithYieldDelayRange(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	if c := NewClient(rdb, WithYieldDelay(maxYieldDelay)); c.err != nil {
		t.Errorf("WithYieldDelay(%v): %v", maxYieldDelay, c.err)
	}
	for _, d := range []time.Duration{-time.Millisecond, maxYieldDelay + 1} {
		c := NewClient(rdb, WithYieldDelay(d))
		if !errors.Is(c.err, ErrInvalidArgument) {
			t.Errorf("WithYieldDelay(%v): %v, want ErrInvalidArgument", d, c.err)
		}
	}
	if c := NewClient(rdb, WithYieldDelay(0)); c.yieldDelay != 0 {
		t.Error("WithYieldDelay(0) did not turn yielding off")
	}
}
