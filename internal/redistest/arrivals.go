package redistest

import (
	"slices"
	"time"
)

// MostInWindow returns the most of the times at (in any order) that fall
// in one half-open window [t, t+w): what a server counting requests per
// sliding window of w would see at its worst.
func MostInWindow(at []time.Time, w time.Duration) int {
	ns := make([]int64, len(at))
	for i, t := range at {
		ns[i] = t.UnixNano()
	}
	slices.Sort(ns)
	n, _ := WorstWindow(ns, int64(w))
	return n
}
