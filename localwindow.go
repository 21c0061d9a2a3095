package ratelimiter

import "time"

// localSlots is the number of slots one interval of a local window is cut
// into; the window counts one slot more (see localWindow).
const localSlots = 64

// localWindow is the in-process limiter of one limiter during an outage
// (WithOutageFallback): at most limit permits in any window of one
// interval of its clock, as Redis's sliding log allows the rate, in
// bounded memory. Time is cut into slots of interval/localSlots counted
// from origin; a take is granted when the permits of the localSlots+1
// newest slots (the slot of now and the localSlots before it, which cover
// at least the interval before now) plus the permits asked for are at
// most limit. Every window of one interval that ends at a grant lies
// inside the slots that grant counted, so no window of one interval
// holds more than limit permits; the price is that a permit comes back
// up to one slot (1/64 of the interval) later than in Redis's log. It is
// not safe for concurrent use: the outage's lock guards it.
type localWindow struct {
	origin time.Time
	slot   time.Duration
	limit  int64
	newest int64                 // index of the newest slot seen
	counts [localSlots + 1]int64 // permits per slot, ring by index
	sum    int64                 // permits in the ring
}

// newLocalWindow returns an empty window of limit permits per interval
// (interval > 0), its slots counted from now.
func newLocalWindow(limit int64, interval time.Duration, now time.Time) *localWindow {
	return &localWindow{origin: now, slot: max(interval/localSlots, 1), limit: limit}
}

// localTake is a local window's answer to one take.
type localTake struct {
	granted bool
	// remaining is the permits left after the take (on a refusal those
	// available), never below 0.
	remaining int64
	// hint is, on a refusal, the time until the permits asked for are
	// free; never: they never are (more than limit asked for).
	hint  time.Duration
	never bool
	// reset is the time until the oldest slot that holds permits leaves
	// the window; 0 when none does.
	reset time.Duration
}

// index returns the slot of t; a clock that steps back before origin
// reads as origin.
func (w *localWindow) index(t time.Time) int64 {
	return int64(max(t.Sub(w.origin), 0) / w.slot)
}

// advance drops the slots that left the window at now. A clock that went
// back leaves the window as it is.
func (w *localWindow) advance(now time.Time) {
	j := w.index(now)
	if j <= w.newest {
		return
	}
	if j-w.newest > localSlots {
		w.counts, w.sum = [localSlots + 1]int64{}, 0
	} else {
		for k := w.newest + 1; k <= j; k++ {
			r := k % (localSlots + 1)
			w.sum -= w.counts[r]
			w.counts[r] = 0
		}
	}
	w.newest = j
}

// leaves returns the time from now until slot k leaves the window.
func (w *localWindow) leaves(k int64, now time.Time) time.Duration {
	return max(w.origin.Add(time.Duration(k+localSlots+1)*w.slot).Sub(now), 1)
}

// empty reports whether no permits are in the window at now: dropping it
// then changes nothing (a new one grants the same).
func (w *localWindow) empty(now time.Time) bool {
	w.advance(now)
	return w.sum == 0
}

// take takes n permits at now if the window has them.
func (w *localWindow) take(n int64, now time.Time) localTake {
	w.advance(now)
	var t localTake
	if w.sum+n <= w.limit {
		w.counts[w.newest%(localSlots+1)] += n
		w.sum += n
		t.granted = true
	}
	t.remaining = max(w.limit-w.sum, 0)
	oldest := max(w.newest-localSlots, 0)
	for k := oldest; k <= w.newest; k++ {
		if w.counts[k%(localSlots+1)] > 0 {
			t.reset = w.leaves(k, now)
			break
		}
	}
	switch {
	case t.granted:
	case n > w.limit:
		t.never = true
	default:
		var freed int64
		need := w.sum + n - w.limit
		for k := oldest; k <= w.newest; k++ {
			if freed += w.counts[k%(localSlots+1)]; freed >= need {
				t.hint = w.leaves(k, now)
				break
			}
		}
	}
	return t
}
