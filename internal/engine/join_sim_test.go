package engine

import (
	"testing"
	"time"
)

// A Redisson service that starts calling beside a Go-only fleet that has
// filled the window gets its first permit within a probe period (3 s at
// 50 per second: probeBudget permits) and a retry tick of its first call
// (issue 40): in each probe window a permit sits free for probeSlot,
// longer than a tick. Simulated (fleetSim), for fleets of 1-8 Clients of
// 1-2 callers, both Redisson retry styles (4.x: on a 100 ms timer tick
// after the hint; 3.16: at the hint), and Redisson starting at eight
// points of a period. Before probe windows, joins took up to the 6 s
// between windows of the time.
func TestSimJoin(t *testing.T) {
	const interval, rate = time.Second, 50
	period := probePeriod(interval, rate, probeBudget)
	for _, shape := range [][2]int{{1, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 0} {
			for k := range 8 {
				start := 3*time.Second + time.Duration(k)*period/8
				s := newFleetSim(shape[0], shape[1], rate, interval, uint64(k+1))
				s.startGo()
				s.runFor(t, start)
				s.startJava(shape[0]*shape[1], tick, 37*time.Millisecond)
				s.runFor(t, period+tick+time.Millisecond)
				n, join := s.javaGrants()
				s.stop()
				if n == 0 || join > period+tick {
					t.Errorf("%dx%d, tick %v, Redisson from %v: %d permits, first after %v; want one within %v",
						shape[0], shape[1], tick, start, n, join, period+tick)
				}
			}
		}
	}
}

// Once Redisson has its first permit, every Client counts the limiter as
// shared within an interval and a census's read: the record of that
// permit stays in the window for an interval, and each Client's
// censuses must not all fall outside it. Otherwise a Client that missed
// it wakes on its hints and takes the freed permits, and Redisson waits
// for the next probe window (a fleet check run read 2, 0, 0 and 3% in
// Java's first four seconds). Simulated as TestSimJoin.
func TestSimJoinSeen(t *testing.T) {
	const interval, rate = time.Second, 50
	period := probePeriod(interval, rate, probeBudget)
	missed, runs := 0, 0
	for _, shape := range [][2]int{{1, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 0} {
			for k := range 8 {
				start := 3*time.Second + time.Duration(k)*period/8
				s := newFleetSim(shape[0], shape[1], rate, interval, uint64(k+1))
				s.startGo()
				s.runFor(t, start)
				s.startJava(shape[0]*shape[1], tick, 37*time.Millisecond)
				s.runFor(t, period+tick+time.Millisecond)
				_, join := s.javaGrants()
				if join < 0 {
					s.stop()
					t.Fatalf("%dx%d, tick %v, Redisson from %v: no permit", shape[0], shape[1], tick, start)
				}
				first := fakeStart.Add(start + join)
				if d := first.Add(interval + 50*time.Millisecond).Sub(s.c.Now()); d > 0 {
					s.runFor(t, d)
				}
				runs++
				for i, e := range s.es {
					if f := fleetCopy(e, "sim"); f == nil || !f.shared(s.c.Now()) {
						missed++
						t.Errorf("%dx%d, tick %v, Redisson from %v, first permit at %v: Client %d does not count the limiter shared at %v",
							shape[0], shape[1], tick, start, since(first), i, since(s.c.Now()))
						break
					}
				}
				s.stop()
			}
		}
	}
	t.Logf("%d of %d runs had a Client that missed the join", missed, runs)
}
