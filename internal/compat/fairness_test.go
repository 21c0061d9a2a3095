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
// Measured spread: the equal-demand rows of docs/fairness.md (6 runs
// each, light load) are 49-61%. Run 28 times with the whole core suite
// running beside it (CI runs it alone, -p 1): 3.16.3 50-56% in 27 runs;
// 4.7.0 mean 44%, 34-51% in 26 and 24% and 29% in two, failures: a JVM
// slowed by that load takes fewer of the permits left to it, and the
// share cannot tell a slow Java side from a starved one.
func TestFairShare(t *testing.T) {
	const dur = 30 * time.Second
	for _, v := range []string{"4.7.0", "3.16.3"} {
		t.Run(v, func(t *testing.T) {
			r := runLoad(t, v, loadSpec{mode: "acquire", dur: dur, javaThreads: loadWorkers, goN: loadWorkers, goClients: 2})
			want := loadRate * int(dur/loadInterval)
			if share := r.javaShare(); share < 30 || share > 70 {
				t.Errorf("Java got %d and Go %d of %d steady-state grants: Java %.0f%%, outside 30-70%%", r.java, r.goSide, r.java+r.goSide, share)
			}
			if r.total*100 < want*95 {
				t.Errorf("%d records scored within the run (Java %d, Go %d steady state), under 95%% of %d", r.total, r.java, r.goSide, want)
			}
		})
	}
}
