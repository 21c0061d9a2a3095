package redistest

import (
	"slices"
	"sync"
	"time"
)

// Grant is one granted call as its caller saw it: sent at Start, answered
// at Reply (both read from this process's monotonic clock), Permits
// granted. The grant happened somewhere in [Start, Reply].
type Grant struct {
	Start, Reply time.Time
	Permits      int64
}

// Grants collects Grants from many goroutines.
type Grants struct {
	mu   sync.Mutex
	list []Grant
}

// Add records a granted call of n permits sent at start and answered now.
func (g *Grants) Add(start time.Time, n int64) {
	reply := time.Now()
	g.mu.Lock()
	g.list = append(g.list, Grant{Start: start, Reply: reply, Permits: n})
	g.mu.Unlock()
}

// List returns the grants recorded so far.
func (g *Grants) List() []Grant {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.list)
}

// StampResolution is the resolution of a permit record's stamp: a grant
// stamped t happened in [t, t+1ms), and its permits come back when the
// clock reads t+interval, so two grants of one permit may be as little as
// the interval less 1 ms apart in real time.
const StampResolution = time.Millisecond

// WorstCertain returns the most permits of grants that certainly
// happened within one half-open window of interval less StampResolution
// of real time, and the start of that window: for each grant's Start s,
// the grants sent at or after s and answered before s + interval -
// StampResolution. No slack is needed for call durations: a grant counts
// in a window only when its whole [Start, Reply] lies inside, so a stalled
// call is counted only in windows that hold its stall. A limiter exact in
// real time never lets it exceed its rate.
func WorstCertain(grants []Grant, interval time.Duration) (int64, time.Time) {
	g := slices.Clone(grants)
	slices.SortFunc(g, func(a, b Grant) int { return a.Start.Compare(b.Start) })
	w := interval - StampResolution
	var most int64
	var at time.Time
	for i := range g {
		end := g[i].Start.Add(w)
		var n int64
		for j := i; j < len(g) && g[j].Start.Before(end); j++ {
			if g[j].Reply.Before(end) {
				n += g[j].Permits
			}
		}
		if n > most {
			most, at = n, g[i].Start
		}
	}
	return most, at
}

// WorstByReply returns the most permits whose replies fall within one
// half-open window [t, t+w), and t: what the callers received in the
// worst window of w.
func WorstByReply(grants []Grant, w time.Duration) (int64, time.Time) {
	g := slices.Clone(grants)
	slices.SortFunc(g, func(a, b Grant) int { return a.Reply.Compare(b.Reply) })
	var most, n int64
	var at time.Time
	j := 0
	for i := range g {
		n += g[i].Permits
		for !g[j].Reply.Add(w).After(g[i].Reply) {
			n -= g[j].Permits
			j++
		}
		if n > most {
			most, at = n, g[j].Reply
		}
	}
	return most, at
}
