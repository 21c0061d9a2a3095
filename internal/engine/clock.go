package engine

import (
	"math/rand/v2"
	"time"
)

// Clock is the time an Engine runs on (Options.Time): its readings of
// now, the timers of its waiters, sleeps and leases, and so every delay it
// measures or waits. The real one is the runtime's; tests inject a fake
// one that moves only when told, so that no test sleeps.
//
// It is not the Client's clock (Options.Clock), which only dates local
// refusals against the sent time of calls. Context deadlines stay in real
// time: the Engine compares them with its Clock's readings, and never
// waits for them but through ctx.Done.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f, on a goroutine of its own or on the caller of
	// whatever moves the clock, once d has passed; C of the returned
	// Timer is nil.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a Timer that sends the time on C once d has
	// passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's timer, as time.Timer (Go 1.23 semantics: Stop and
// Reset leave no stale value to receive).
type Timer interface {
	// C delivers the time when the timer fires; nil for AfterFunc's.
	C() <-chan time.Time
	// Stop stops the timer; it reports whether it was pending.
	Stop() bool
	// Reset makes the timer fire d from now; it reports whether it was
	// pending.
	Reset(d time.Duration) bool
}

// realClock is the runtime's time: the Clock of an Engine whose
// Options.Time is nil.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// realTimer is a time.Timer as a Timer. One pointer: it goes in an
// interface without an allocation.
type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// randomDraw is the spread's draw of an Engine whose Options.Draw is nil:
// uniform in [0, bound), bound > 0.
func randomDraw(bound time.Duration) time.Duration { return rand.N(bound) }
