package compat

import (
	"testing"
	"time"
)

// TestFairShare: 4 Java threads beside 2 Go Clients of 2 goroutines, all
// in blocking acquire(1) on one 50/s limiter for 30 s, Redisson 4.7.0 and
// 3.16.3: each side gets 30-70% of the steady-state grants, and together
// at least 95% of the rate over the run (by record scores). The band is
// the per-run band. It is wide because the window's records
// clump: one side often takes most of the permits that free at once.
//
// The steady state starts an interval after both sides' first grants
// (loadResult). The Go Clients take the whole first window before the
// JVM's first calls arrive, so Java joins when a retry of it meets a
// freed permit, or in a probe window, the next of which starts within 6 s
// of the wall clock (docs/fairness.md, "Joining"); counted from the
// start, that wait read as a low share (the two failures of 28 runs with
// an earlier rule, 24% and 29%, were of that kind). The join has its own
// check: at least 15 s of steady state, so Java's first grant within 14 s
// of the run's start: a second for its first call to arrive, then the
// second probe window after it (a first one missed) and that window's
// interval. What the share no longer catches: a slow join, up to that
// bound, which this test logs.
//
// Measured spread: the equal-demand rows of docs/fairness.md (6 runs
// each, nothing else running) are 44-58%; 20 runs of this test beside a
// full CI run (docs/fairness.md, "Joining") are in its text with the
// join times they logged.
func TestFairShare(t *testing.T) {
	const dur = 30 * time.Second
	for _, v := range []string{"4.7.0", "3.16.3"} {
		t.Run(v, func(t *testing.T) {
			r := runLoad(t, v, loadSpec{mode: "acquire", dur: dur, javaThreads: loadWorkers, goN: loadWorkers, goClients: 2})
			want := loadRate * int(dur/loadInterval)
			if r.steadyMs < 15_000 {
				t.Errorf("steady state of %d ms: Java's first grant came %d ms into the run, Go's %d ms", r.steadyMs, r.javaJoinMs, r.goJoinMs)
			}
			if share := r.javaShare(); share < 30 || share > 70 {
				t.Errorf("Java got %d and Go %d of %d steady-state grants: Java %.0f%%, outside 30-70%%", r.java, r.goSide, r.java+r.goSide, share)
			}
			if r.total*100 < want*95 {
				t.Errorf("%d records scored within the run (Java %d, Go %d steady state), under 95%% of %d", r.total, r.java, r.goSide, want)
			}
		})
	}
}
