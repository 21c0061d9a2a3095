package engine

import (
	"fmt"
	"testing"
	"time"
)

// A Redisson service that starts calling beside a Go-only fleet that has
// filled the window gets its first permit within a probe period (3 s at
// 50 per second: probeBudget permits) and a retry tick of its first call
// (issue 40): in each probe window a permit sits free for probeSlot,
// longer than a tick. Before probe windows, joins took up to the 6 s
// between windows of the time. And an interval after that first permit,
// every Client counts the limiter as shared: the permit's record stays
// in the window for an interval, and a Client whose censuses all missed
// it would wake on its hints and take the freed permits, leaving
// Redisson to the next probe window (a fleet check run read 2, 0, 0 and
// 3% in Java's first four seconds; which path it took is not known).
// Simulated (fleetSim), for fleets of 1-8 Clients of 1-2 callers, both
// Redisson retry styles (4.x: on a 100 ms timer tick after the hint;
// 3.16: at the hint), and Redisson starting at eight points of a period.
func TestSimJoin(t *testing.T) {
	const interval, rate = time.Second, 50
	period := probePeriod(interval, rate, probeBudget)
	for _, shape := range [][2]int{{1, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 0} {
			for k := range 8 {
				start := 3*time.Second + time.Duration(k)*period/8
				what := fmt.Sprintf("%dx%d, tick %v, Redisson from %v", shape[0], shape[1], tick, start)
				s := newFleetSim(shape[0], shape[1], rate, interval, uint64(k+1))
				s.startGo()
				s.runFor(t, start)
				s.startJava(shape[0]*shape[1], tick, 37*time.Millisecond)
				s.runFor(t, period+tick+time.Millisecond)
				if n, join := s.javaGrants(); n == 0 || join > period+tick {
					t.Errorf("%s: %d permits, first after %v; want one within %v", what, n, join, period+tick)
				} else {
					checkJoinSeen(t, s, what, fakeStart.Add(start+join), interval)
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
