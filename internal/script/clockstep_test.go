package script

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The slowest recent round trip takes a slower one at once, and comes an
// eighth of the way down to each faster one.
func TestNoteTrip(t *testing.T) {
	var w clockWatch
	w.noteTrip(80 * time.Millisecond)
	if got := time.Duration(w.slow.Load()); got != 80*time.Millisecond {
		t.Fatalf("after one 80 ms trip: %v", got)
	}
	w.noteTrip(time.Millisecond)
	if got, want := time.Duration(w.slow.Load()), 80*time.Millisecond-79*time.Millisecond/8; got != want {
		t.Errorf("after a 1 ms trip: %v, want %v", got, want)
	}
	for i := 0; i < 100; i++ {
		w.noteTrip(time.Millisecond)
	}
	if got := time.Duration(w.slow.Load()); got > 2*time.Millisecond {
		t.Errorf("after 100 trips of 1 ms: %v, want about 1 ms", got)
	}
	w.noteTrip(time.Second)
	if got := time.Duration(w.slow.Load()); got != time.Second {
		t.Errorf("after a 1 s trip: %v", got)
	}
}

// The bound an acquire call sends is made once per millisecond and sent
// as is by every call in it: a string made per call was two allocations.
func TestAcquireStampOncePerMillisecond(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	c := New(rdb, Options{})
	now := time.Now()
	c.watch.last.Store(&clockRead{server: now, local: now})
	c.watch.next.Store(math.MaxInt64) // no reading falls due
	ctx := context.Background()
	for range 3 {
		before := time.Now().Add(clockStepMin).UnixMilli()
		s, ok := c.acquireStamp(ctx).(string)
		after := time.Now().Add(clockStepMin).UnixMilli()
		ms, err := strconv.ParseInt(strings.TrimSuffix(s, "."), 10, 64)
		if !ok || len(s) != 14 || s[13] != '.' || err != nil || ms < before || ms > after {
			t.Fatalf("bound %q, want the ms between %d and %d and a '.'", s, before, after)
		}
	}
	// 1,000 calls cross a few ms boundaries, each one string and one
	// stampArg: well under one allocation a call unless the machine
	// stalls for over 250 ms.
	if n := testing.AllocsPerRun(1000, func() { _ = c.acquireStamp(ctx) }); n > 0.5 {
		t.Errorf("%.2f allocations a call", n)
	}
}
