package main

import (
	"fmt"
	"io"
	"slices"
)

// combiningNames are the contenders of the combining table: this library
// with and without combining, Redisson and the floor.
var combiningNames = []string{"ratelimiter (default)", "ratelimiter WithMaxBatch(1)", redissonName, floorName}

// combiningTable reads the granted path's throughput runs again, by caller
// count, for what combining changes, with ratios to Redisson (the library
// it ports) rather than to the first contender.
func (r *results) combiningTable(w io.Writer) {
	ref := slices.Index(r.names, redissonName)
	fmt.Fprintf(w, "### Combining: this library with and without, against Redisson\n\n"+
		"The granted path's runs above, by caller count; (x) is the ratio to %s in this run.\n\n", redissonName)
	if ref < 0 {
		fmt.Fprintf(w, "(Redisson left out: no ratios.)\n\n")
	}
	fmt.Fprint(w, "| callers | contender | decisions/s | Redis CPU µs/decision | script calls/decision | commands/decision |\n|---:|---|---:|---:|---:|---:|\n")
	at := func(i, callers int, f func(sample) float64) float64 {
		return median(pick(r.tp["granted"][callers][i], f))
	}
	perSec := func(s sample) float64 { return s.perSec }
	cpu := func(s sample) float64 { return s.cpuUs }
	vs := func(i, callers int, f func(sample) float64, digits int) string {
		if ref < 0 {
			return group(at(i, callers, f), digits)
		}
		return withRatio(at(i, callers, f), at(ref, callers, f), digits)
	}
	for _, callers := range r.plan.callers {
		for _, name := range combiningNames {
			i := slices.Index(r.names, name)
			if i < 0 {
				continue
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %.3f | %.2f |\n", callers, name, vs(i, callers, perSec, 0), vs(i, callers, cpu, 1),
				at(i, callers, func(s sample) float64 { return s.scripts }), at(i, callers, func(s sample) float64 { return s.commands }))
		}
	}
	fmt.Fprintln(w)
}
