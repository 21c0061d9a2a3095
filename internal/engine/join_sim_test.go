package engine

import (
	"fmt"
	"testing"
	"time"
)

// A Redisson service that starts calling beside a Go-only fleet that has
// filled the window gets its first permit within an interval and a retry
// tick of its first call, and hintPad, which its scripts add (issue 40):
// it follows the window's oldest records one expiry at a time and, within
// an interval, comes to the probe record's expiry, which Go leaves free
// for wire.ProbeHold, longer than a tick (proberecord.go). With the probe
// windows alone (before the probe record) joins took up to a probe period
// (3 s at 50 per second). And an interval after that first permit, every
// Client counts the limiter as shared: the permit's record stays in the
// window for an interval, and a Client whose censuses all missed it would
// wake on its hints and take the freed permits (a fleet check run read 2,
// 0, 0 and 3% in Java's first four seconds; which path it took is not
// known). Simulated (fleetSim), for fleets of 1-8 Clients of 1-2 callers,
// Redisson 4.x's retry styles (on a timer tick after the hint: ticks of
// 10, 49 and 100 ms) and 3.16's (at the hint), and Redisson starting
// 100 ms after the fleet (which filled the window in its first instants:
// the probe record must be among those first grants), or at eight points
// of an interval after the fleet has run alone for 3 s.
func TestSimJoin(t *testing.T) {
	const interval, rate = time.Second, 50
	for _, shape := range [][2]int{{1, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 49 * time.Millisecond, 10 * time.Millisecond, 0} {
			for k := range 9 {
				start := 100 * time.Millisecond
				if k > 0 {
					start = 3*time.Second + time.Duration(k-1)*interval/8
				}
				what := fmt.Sprintf("%dx%d, tick %v, Redisson from %v", shape[0], shape[1], tick, start)
				s := newFleetSim(shape[0], shape[1], rate, interval, uint64(k+1))
				s.startGo()
				s.runFor(t, start)
				s.startJava(shape[0]*shape[1], tick, 37*time.Millisecond)
				bound := interval + tick + hintPad
				s.runFor(t, bound+time.Millisecond)
				if n, join := s.javaGrants(); n == 0 || join > bound {
					t.Errorf("%s: %d permits, first after %v; want one within %v", what, n, join, bound)
				} else {
					checkJoinSeen(t, s, what, fakeStart.Add(start+join), interval)
				}
				s.stop()
			}
		}
	}
}

// With WithForeignWaiters told the Redisson threads, TestSimJoin's bound
// holds too, for three of its shapes and starts. Its count of blocking calls makes a Client's
// fleet before its first call, and the first calls once took that for a
// known limiter and wrote no probe record: Redisson starting with the
// fleet waited for the second clump's record, about two intervals (a
// fairness table run read 2.02-2.04 s in all 16 runs of these rows, on
// 4.7.0 and 3.16.3). The sim starts Redisson 100 ms after the fleet, as
// TestSimJoin does.
func TestSimJoinForeign(t *testing.T) {
	const interval, rate = time.Second, 50
	for _, shape := range [][3]int{{4, 2, 1}, {1, 1, 8}, {2, 2, 4}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond, 0} {
			for _, start := range []time.Duration{100 * time.Millisecond, 3 * time.Second, 3*time.Second + interval/2} {
				java := shape[2]
				what := fmt.Sprintf("%dx%d:%d, tick %v, Redisson from %v", shape[0], shape[1], java, tick, start)
				s := newFleetSim(shape[0], shape[1], rate, interval, 7, func(o *Options) { o.Foreign = java })
				s.startGo()
				s.runFor(t, start)
				s.startJava(java, tick, 37*time.Millisecond)
				bound := interval + tick + hintPad
				s.runFor(t, bound+time.Millisecond)
				if n, join := s.javaGrants(); n == 0 || join > bound {
					t.Errorf("%s: %d permits, first after %v; want one within %v", what, n, join, bound)
				}
				s.stop()
			}
		}
	}
}

// checkJoinSeen runs s on to an interval and 50 ms after Redisson's
// first permit at first, and checks that each Client counts the limiter
// as shared then.
func checkJoinSeen(t *testing.T, s *fleetSim, what string, first time.Time, interval time.Duration) {
	t.Helper()
	if d := first.Add(interval + 50*time.Millisecond).Sub(s.c.Now()); d > 0 {
		s.runFor(t, d)
	}
	for i, e := range s.es {
		if f := fleetCopy(e, "sim"); f == nil || !f.shared(s.c.Now()) {
			t.Errorf("%s, first permit at %v: Client %d does not count the limiter shared at %v",
				what, since(first), i, since(s.c.Now()))
		}
	}
}

// What the probe record costs a Go-only fleet (issue 40: grants within 1%,
// script calls within 10%): the same fleet on the same simulated window
// for 20 s after 3 s alone, with the probe record and without it (a
// window in FI, which has none: the probe windows alone). The run is the
// same every time (fleetSim), so the bounds are the issue's, not a band
// from a spread. At these shapes the runs read grants 0.997-1.005x and
// calls 1.000-1.023x: the owner's call an interval, and the permit idle
// for the hold, against the idle permit that each probe window left.
func TestSimProbeRecordCost(t *testing.T) {
	const interval, rate = time.Second, 50
	for _, shape := range [][2]int{{1, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}, {1, 16}} {
		var grants, calls [2]int64
		for i, noProbe := range []bool{true, false} {
			s := newFleetSim(shape[0], shape[1], rate, interval, 1)
			s.w.noProbe = noProbe
			s.startGo()
			s.runFor(t, 3*time.Second)
			g0, c0 := s.goGrant.Load(), s.calls.Load()
			s.runFor(t, 20*time.Second)
			grants[i], calls[i] = s.goGrant.Load()-g0, s.calls.Load()-c0
			s.stop()
		}
		g, c := float64(grants[1])/float64(grants[0]), float64(calls[1])/float64(calls[0])
		t.Logf("%dx%d: grants %d, %d with the probe record (%.3fx); calls %d, %d (%.3fx)",
			shape[0], shape[1], grants[0], grants[1], g, calls[0], calls[1], c)
		if g < 0.99 || c > 1.10 {
			t.Errorf("%dx%d: the probe record costs grants %.3fx, calls %.3fx; want at least 0.99x, at most 1.10x", shape[0], shape[1], g, c)
		}
	}
}

// Where the probe record is sparse (25 per 500 ms: its held permit would
// cost more than probeIdleShare of the grants), a Redisson service that
// starts calling beside a busy Go-only fleet gets its first permit within
// a probe period (3 s here) after the last probe record expired, an
// interval and a tick: the joins of the probe windows before the probe
// record. Simulated as TestSimJoin, at eight points of a period.
func TestSimJoinSparse(t *testing.T) {
	const interval, rate = 500 * time.Millisecond, 25
	period := probePeriod(interval, rate, probeBudget)
	for _, shape := range [][2]int{{1, 1}, {2, 2}, {4, 2}, {1, 16}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 0} {
			for k := range 8 {
				start := 3*time.Second + time.Duration(k)*period/8
				what := fmt.Sprintf("%dx%d, tick %v, Redisson from %v", shape[0], shape[1], tick, start)
				s := newFleetSim(shape[0], shape[1], rate, interval, uint64(k+1))
				s.startGo()
				s.runFor(t, start)
				s.startJava(shape[0]*shape[1], tick, 37*time.Millisecond)
				bound := period + interval + tick + hintPad
				s.runFor(t, bound+time.Millisecond)
				n, join := s.javaGrants()
				t.Logf("%s: join %v", what, join)
				if n == 0 || join > bound {
					t.Errorf("%s: %d permits, first after %v; want one within %v", what, n, join, bound)
				}
				s.stop()
			}
		}
	}
}
