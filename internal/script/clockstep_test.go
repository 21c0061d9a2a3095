package script

import (
	"testing"
	"time"
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
