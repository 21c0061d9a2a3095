package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
)

// Leases by regime (issue 36): what WithLeases gives the largest fleet
// (64 Clients of one caller each) by how long the fleet asks and how near
// the rate. A lease is taken only while the window after it holds at most
// Share of the rate, so its gain depends on both: the under-asking table's
// one regime (500 ms far from the rate) ends about when leases stop. The
// largest shape's Clients (the lease row's are made for each run and
// closed at its end, as in the tables above), the defaults and Redisson
// beside the lease row, each run on a fresh limiter.

// leaseRegimeSides are the contenders of the lease regimes, by name.
var leaseRegimeSides = []string{"ratelimiter (default)", leaseName, redissonName}

// leaseRegimeResult is the lease regimes' runs.
type leaseRegimeResult struct {
	shape   fleetShape
	regimes []fleetRegime
	names   []string
	samples [][][]fleetSample // by regime, contender, round
}

// runLeaseRegimes runs plan.leaseRegimes on shape s with the shape's
// started Clients cs of sides, plan.fleetRounds rounds each that
// alternate the contenders.
func (b *bench) runLeaseRegimes(ctx context.Context, res *fleetResult, sides []fleetSide, cs []fleetClients, s fleetShape) error {
	var idx []int
	lr := &leaseRegimeResult{shape: s, regimes: b.plan.leaseRegimes}
	for _, name := range leaseRegimeSides {
		if i := slices.IndexFunc(sides, func(f fleetSide) bool { return f.name == name }); i >= 0 {
			idx = append(idx, i)
			lr.names = append(lr.names, name)
		}
	}
	for _, g := range lr.regimes {
		all := make([][]fleetSample, len(idx))
		for r := 0; r < b.plan.fleetRounds; r++ {
			for _, k := range order(r, len(idx)) {
				smp, err := b.fleetRun(ctx, sides[idx[k]], cs[idx[k]], s, g)
				if err != nil {
					return err
				}
				all[k] = append(all[k], smp)
			}
		}
		lr.samples = append(lr.samples, all)
		b.progress("fleet %s Clients x callers, leases by regime, %s: done", s, g.name)
	}
	res.leaseRegimes = lr
	return nil
}

// at returns the median over the rounds of f for contender k in regime
// gi, of the rounds where f is defined (NaN: none).
func (lr *leaseRegimeResult) at(gi, k int, f func(fleetSample) float64) float64 {
	return medianOf(lr.samples[gi][k], f)
}

// most is the worst round's most grants proven in one window of regime
// gi, as a multiple of its rate.
func (lr *leaseRegimeResult) most(gi, k int) float64 {
	return worstShare(lr.samples[gi][k], lr.regimes[gi].rate)
}

func (lr *leaseRegimeResult) table(w io.Writer) {
	ref := slices.Index(lr.names, redissonName)
	fmt.Fprintf(w, "### Fleet: leases by regime, %s\n\n", lr.shape)
	fmt.Fprintf(w, "The largest fleet of the tables above (%s: Clients x callers each, the same Clients; the lease row's made "+
		"for each run and closed at its end), every caller "+
		"as fast as it can, on a fresh limiter per run; each row a regime: the limiter's rate and how long the fleet "+
		"asks. A lease is taken only while the window after it holds at most Share of the rate (LeaseOptions; "+
		"0.1 by default), so what leases give depends on how long the fleet asks and how near the rate. Medians of "+
		"%d round(s) that alternate the contenders; Redis CPU per grant from INFO cpu (the whole server); (x) is the "+
		"ratio to %s in the same regime; grants from leases: the share of the lease row's grants whose permits came "+
		"from lease records; most permits in a window as in the tables above (worst round).\n\n",
		lr.shape, len(lr.samples[0][0]), redissonName)
	fmt.Fprint(w, "| rate | run | contender | Redis CPU µs/grant | decisions/s | granted | grants from leases | "+
		"most permits in a window / rate |\n|---|---:|---|---:|---:|---:|---:|---:|\n")
	perGrant := func(s fleetSample) float64 { return s.cpuPerGrant() }
	for gi, g := range lr.regimes {
		for k, name := range lr.names {
			v := lr.at(gi, k, perGrant)
			cpu := nanDash(v, 2)
			if ref >= 0 && k != ref && !math.IsNaN(v) {
				cpu = withRatio(v, lr.at(gi, ref, perGrant), 2)
			}
			leased := "—"
			if name == leaseName {
				leased = pct(lr.at(gi, k, fleetSample.leasedShare))
			}
			fmt.Fprintf(w, "| %s per %v | %v | %s | %s | %s | %.1f%% | %s | %s |\n", group(float64(g.rate), 0), g.interval,
				g.run, name, cpu, group(lr.at(gi, k, fleetSample.perSec), 0),
				100*lr.at(gi, k, fleetSample.granted), leased, heldCell(lr.most(gi, k)))
		}
	}
	fmt.Fprintln(w)
}
