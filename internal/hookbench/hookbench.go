// Package hookbench measures what a hook adds to each call: it runs the
// same call with and without the hook in alternating rounds, so that
// drift in the machine's load falls on both sides alike, and reports the
// difference in time and allocations per call.
package hookbench

import (
	"runtime"
	"testing"
	"time"
)

// Side is one way of making the call: Call makes it once.
type Side struct {
	Name string
	Call func() error
}

// Rounds is how many times each side runs, in turn.
const Rounds = 10

// Alternate runs each side b.N times in all, split into Rounds rounds
// that take the sides in turn, and reports for each side after the first
// its ns and allocations per call minus the first side's, as the metrics
// "<name>-Δns/op" and "<name>-Δallocs/op", and the first side's
// "<name>-ns/op". It fails b on the first error a call returns.
func Alternate(b *testing.B, sides ...Side) {
	b.Helper()
	ns := make([]time.Duration, len(sides))
	allocs := make([]uint64, len(sides))
	per := max(1, b.N/Rounds)
	var ms runtime.MemStats
	b.ResetTimer()
	for r := 0; r < Rounds; r++ {
		for i, s := range sides {
			runtime.ReadMemStats(&ms)
			a0, t0 := ms.Mallocs, time.Now()
			for k := 0; k < per; k++ {
				if err := s.Call(); err != nil {
					b.Fatalf("%s: %v", s.Name, err)
				}
			}
			ns[i] += time.Since(t0)
			runtime.ReadMemStats(&ms)
			allocs[i] += ms.Mallocs - a0
		}
	}
	b.StopTimer()
	calls := float64(per * Rounds)
	base, baseAllocs := float64(ns[0])/calls, float64(allocs[0])/calls
	b.ReportMetric(base, sides[0].Name+"-ns/op")
	b.ReportMetric(baseAllocs, sides[0].Name+"-allocs/op")
	for i, s := range sides[1:] {
		b.ReportMetric(float64(ns[i+1])/calls-base, s.Name+"-Δns/op")
		b.ReportMetric(float64(allocs[i+1])/calls-baseAllocs, s.Name+"-Δallocs/op")
	}
}
