package engine

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when a test calls Advance: no test
// sleeps, and every time the Engine reads or waits for is one the test
// chose. It starts in 2100, so that a context whose deadline is one of
// its times never ends in real time during a test (the Engine compares
// deadlines with its Clock; contexts keep real time).
//
// Advance fires the due timers in order of their time (then of when they
// were set): an AfterFunc's function runs on the goroutine that called
// Advance, as the engine's lane and lease timers expect of no particular
// goroutine; a NewTimer's channel gets the time, and its receiver goes on
// on its own goroutine. A test waits for what that receiver does next
// (waitFor, waitTimers) before it advances again.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer // pending, unordered
	// onTimer, when set, runs the AfterFunc functions that fireNext fires
	// (for functions that may block on the clock).
	onTimer func(f func())
}

// fakeStart is every fake clock's first reading.
var fakeStart = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock { return &fakeClock{now: fakeStart} }

// fakeTimer is a timer of a fakeClock.
type fakeTimer struct {
	c    *fakeClock
	when time.Time
	seq  int
	f    func()         // AfterFunc's; nil for NewTimer's
	ch   chan time.Time // NewTimer's, buffered
	live bool           // pending
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{c: c, f: f}
	t.Reset(d)
	return t
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.live
	t.unlink()
	t.drain()
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.live
	t.unlink()
	t.drain()
	c.seq++
	t.when, t.seq, t.live = c.now.Add(d), c.seq, true
	c.timers = append(c.timers, t)
	return was
}

// unlink takes t off the pending timers. Call with c.mu held.
func (t *fakeTimer) unlink() {
	if t.live {
		t.c.timers = slices.DeleteFunc(t.c.timers, func(x *fakeTimer) bool { return x == t })
		t.live = false
	}
}

// drain drops a value sent and not received: after Stop or Reset no stale
// time is received (Go 1.23 timers).
func (t *fakeTimer) drain() {
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
}

// Advance moves the clock d on, firing every timer due by then, the
// earliest first, timers set by those it fires included.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	c.AdvanceTo(end)
}

// AdvanceTo moves the clock on to end (never back), firing every timer
// due by then, as Advance does.
func (c *fakeClock) AdvanceTo(end time.Time) {
	for c.fireNext(end) {
	}
}

// goAdvanceTo runs AdvanceTo on a goroutine of its own and returns a
// channel closed when it has returned: for a timer whose function blocks
// in a gated Decide until the test answers it.
func (c *fakeClock) goAdvanceTo(end time.Time) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.AdvanceTo(end)
	}()
	return done
}

// pending returns the times of the pending timers, earliest first.
func (c *fakeClock) pending() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := make([]time.Time, 0, len(c.timers))
	for _, t := range c.timers {
		ts = append(ts, t.when)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// at returns the fake time d after fakeStart.
func at(d time.Duration) time.Time { return fakeStart.Add(d) }

// since returns how long after fakeStart tm is, for messages.
func since(tm time.Time) time.Duration { return tm.Sub(fakeStart) }

// waitTimers waits until exactly the timers at the times want (after
// fakeStart, in any order) are pending: the goroutines that set them
// have got that far.
func waitTimers(t *testing.T, c *fakeClock, want ...time.Duration) {
	t.Helper()
	slices.Sort(want)
	waitFor(t, "timers at "+fmtDurations(want), func() bool {
		got := c.pending()
		if len(got) != len(want) {
			return false
		}
		for i, g := range got {
			if since(g) != want[i] {
				return false
			}
		}
		return true
	}, func() string { return "pending: " + fmtTimes(c.pending()) })
}

// spinBound bounds waitFor's turns: the states it waits for come within a
// few goroutine switches; reaching it means a goroutine never got there.
const spinBound = 20_000_000

// waitFor yields until cond holds, and fails the test if it never does.
// It never sleeps: it is for states that other goroutines reach without
// the clock moving. state, when not nil, says what was seen instead.
func waitFor(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == spinBound {
			msg := ""
			for _, s := range state {
				msg += "; " + s()
			}
			t.Fatalf("never: %s%s", what, msg)
		}
		runtime.Gosched()
	}
}

// recv returns what ch delivers, failing the test if nothing comes: a
// caller that never returns fails its test instead of hanging it.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	var v T
	waitFor(t, what, func() bool {
		select {
		case v = <-ch:
			return true
		default:
			return false
		}
	})
	return v
}

func fmtDurations(ds []time.Duration) string {
	s := "["
	for i, d := range ds {
		if i > 0 {
			s += " "
		}
		s += d.String()
	}
	return s + "]"
}

func fmtTimes(ts []time.Time) string {
	ds := make([]time.Duration, len(ts))
	for i, tm := range ts {
		ds[i] = since(tm)
	}
	return fmtDurations(ds)
}

// The fake clock fires due timers in order of time, then of setting,
// never early, never twice; Stop and Reset leave nothing stale.
func TestFakeClock(t *testing.T) {
	c := newFakeClock()
	var fired []string
	c.AfterFunc(30*time.Millisecond, func() { fired = append(fired, "b") })
	c.AfterFunc(10*time.Millisecond, func() {
		fired = append(fired, "a")
		c.AfterFunc(5*time.Millisecond, func() { fired = append(fired, "a2") }) // at 15 ms
	})
	c.AfterFunc(30*time.Millisecond, func() { fired = append(fired, "c") })
	stopped := c.AfterFunc(20*time.Millisecond, func() { fired = append(fired, "stopped") })
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop: want true for a pending timer, then false")
	}
	ch := c.NewTimer(25 * time.Millisecond)
	c.Advance(29 * time.Millisecond)
	if !slices.Equal(fired, []string{"a", "a2"}) {
		t.Errorf("fired by 29 ms: %v, want [a a2]", fired)
	}
	select {
	case tm := <-ch.C():
		if since(tm) != 25*time.Millisecond {
			t.Errorf("NewTimer sent %v, want 25ms", since(tm))
		}
	default:
		t.Error("NewTimer's channel empty after its time")
	}
	if since(c.Now()) != 29*time.Millisecond {
		t.Errorf("now %v, want 29ms", since(c.Now()))
	}
	c.Advance(time.Millisecond)
	if !slices.Equal(fired, []string{"a", "a2", "b", "c"}) {
		t.Errorf("fired by 30 ms: %v, want [a a2 b c]", fired)
	}
	ch.Reset(time.Millisecond)
	c.Advance(time.Millisecond)
	if ch.Reset(time.Millisecond) { // fired, its time not received: Reset drops it
		t.Error("Reset of a fired timer reported it pending")
	}
	select {
	case <-ch.C():
		t.Error("a stale time was received after Reset")
	default:
	}
	if got := c.pending(); len(got) != 1 || since(got[0]) != 32*time.Millisecond {
		t.Errorf("pending %v, want [32ms]", fmtTimes(got))
	}
}

// sleepers returns how many NewTimer timers are pending: goroutines asleep
// on the clock.
func (c *fakeClock) sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.ch != nil {
			n++
		}
	}
	return n
}

// fireNext moves the clock to the earliest pending timer (by time, then
// by when it was set) and fires that one alone, unless none is pending by
// end (false; the clock moves to end). An AfterFunc's function runs on
// this goroutine, or through onTimer when set; a NewTimer's channel gets
// the time (buffered, drained by Stop and Reset: never blocks).
func (c *fakeClock) fireNext(end time.Time) bool {
	c.mu.Lock()
	var next *fakeTimer
	for _, t := range c.timers {
		if !t.when.After(end) && (next == nil || t.when.Before(next.when) || t.when.Equal(next.when) && t.seq < next.seq) {
			next = t
		}
	}
	if next == nil {
		if end.After(c.now) {
			c.now = end
		}
		c.mu.Unlock()
		return false
	}
	if next.when.After(c.now) {
		c.now = next.when
	}
	next.unlink()
	now := c.now
	c.mu.Unlock()
	switch {
	case next.f != nil && c.onTimer != nil:
		c.onTimer(next.f)
	case next.f != nil:
		next.f()
	default:
		next.ch <- now
	}
	return true
}
