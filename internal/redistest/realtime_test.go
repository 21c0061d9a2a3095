package redistest

import (
	"testing"
	"time"
)

func TestWorstCertain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	grants := []Grant{
		{Start: at(0), Reply: at(5), Permits: 2},
		{Start: at(10), Reply: at(2500), Permits: 7}, // stalled: spans more than the window
		{Start: at(500), Reply: at(510), Permits: 3},
		{Start: at(998), Reply: at(998), Permits: 4}, // inside [0, 999) only just
		{Start: at(999), Reply: at(999), Permits: 5}, // outside it
	}
	if n, w := WorstCertain(grants, time.Second); n != 12 || !w.Equal(at(10)) {
		// [10, 1009) holds 3+4+5 (the stalled call ends outside); [0, 999) 2+3+4.
		t.Fatalf("WorstCertain = %d at %v, want 12 at 10 ms", n, w.Sub(t0))
	}
	grants[4].Permits = 1
	if n, w := WorstCertain(grants, time.Second); n != 9 || !w.Equal(at(0)) {
		t.Fatalf("WorstCertain = %d at %v, want 9 at 0 ms", n, w.Sub(t0))
	}
}

func TestWorstByReply(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	grants := []Grant{
		{Reply: at(0), Permits: 1},
		{Reply: at(999), Permits: 2},
		{Reply: at(1000), Permits: 4},
		{Reply: at(1500), Permits: 8},
	}
	if n, w := WorstByReply(grants, time.Second); n != 14 || !w.Equal(at(999)) {
		t.Fatalf("WorstByReply = %d at %v, want 14 at 999 ms", n, w.Sub(t0))
	}
}
