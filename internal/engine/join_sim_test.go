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
