package engine

import (
	"testing"
	"time"
)

// A Redisson service that starts calling beside a Go-only fleet that has
// filled the window gets its first permit within an interval and a retry
// tick of its first call (issue 40): probe windows come every interval,
// and in each a permit sits free for probeSlot, longer than a tick.
// Simulated (fleetSim), for fleets of 1-8 Clients of 1-2 callers, both
// Redisson retry styles (4.x: on a 100 ms timer tick after the hint;
// 3.16: at the hint), and Redisson starting at eight points of a window.
// Before probe windows came every interval, joins took up to the 6 s
// between windows.
func TestSimJoin(t *testing.T) {
	const interval = time.Second
	for _, shape := range [][2]int{{1, 1}, {1, 2}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}} {
		for _, tick := range []time.Duration{100 * time.Millisecond, 0} {
			for k := range 8 {
				start := 3*time.Second + time.Duration(k)*interval/8
				s := newFleetSim(shape[0], shape[1], 50, interval, uint64(k+1))
				s.startGo()
				s.runFor(t, start)
				s.startJava(shape[0]*shape[1], tick, 37*time.Millisecond)
				s.runFor(t, interval+tick+time.Millisecond)
				n, join := s.javaGrants()
				s.stop()
				if n == 0 || join > interval+tick {
					t.Errorf("%dx%d, tick %v, Redisson from %v: %d permits, first after %v; want one within %v",
						shape[0], shape[1], tick, start, n, join, interval+tick)
				}
			}
		}
	}
}
