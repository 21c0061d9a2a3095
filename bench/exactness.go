package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// exactSample is one contender's exactness: the boundary-burst run and
// the steady overload run.
type exactSample struct {
	noRule      bool // the floor: nothing to measure
	burstGrants int64
	maxWindow   float64 // most grants in any window of the interval, / rate
	series      []point // grants in the window ending at x (intervals since start), / rate
	steadyShare float64 // grants after the first interval / (rate x the intervals after it)
}

type point struct{ x, y float64 }

// exactness runs both workloads for every contender, one after another.
func (b *bench) exactness(ctx context.Context) ([]exactSample, error) {
	out := make([]exactSample, len(b.cs))
	for i, c := range b.cs {
		if c.noRule {
			out[i] = exactSample{noRule: true}
			continue
		}
		s, err := b.boundaryBursts(ctx, c)
		if err != nil {
			return nil, err
		}
		s.steadyShare, err = b.steadyOverload(ctx, c)
		if err != nil {
			return nil, err
		}
		out[i] = s
		b.progress("exactness %s: %.2fx in the worst window, %.3f of the rate under steady overload", c.name, s.maxWindow, s.steadyShare)
	}
	return out, nil
}

// boundaryBursts hammers a fresh limiter from plan.exactCallers callers
// from a tenth of an interval before each of plan.bursts window
// boundaries (multiples of the interval on the clock, where the fixed
// windows turn) to a tenth after, and idles in between.
func (b *bench) boundaryBursts(ctx context.Context, c contender) (exactSample, error) {
	rate, iv := b.plan.exactRate, b.plan.exactInterval
	l, key, err := b.opened(ctx, c, "burst", rate, iv)
	if err != nil {
		return exactSample{}, err
	}
	defer b.drop(ctx, key)
	half := iv / 10
	t0 := time.Now().Add(50 * time.Millisecond).Truncate(iv).Add(iv) // a boundary
	var stamps []int64
	for k := 1; k <= b.plan.bursts; k++ {
		start := t0.Add(time.Duration(k)*iv - half)
		if err := sleepUntil(ctx, start); err != nil {
			return exactSample{}, err
		}
		o, err := l.run(ctx, b.plan.exactCallers, 2*half, true)
		if err != nil {
			return exactSample{}, fmt.Errorf("%s: %w", c.name, err)
		}
		stamps = append(stamps, o.stamps...)
	}
	slices.Sort(stamps)
	s := exactSample{burstGrants: int64(len(stamps))}
	w := measuredWindow(iv)
	s.maxWindow = float64(maxInWindow(stamps, w)) / float64(rate)
	end := t0.Add(time.Duration(b.plan.bursts)*iv + 2*half)
	s.series = windowSeries(stamps, t0, t0.Add(iv/2), end, w, iv, rate)
	return s, nil
}

// steadyOverload hammers a fresh limiter for plan.steady intervals and
// returns the grants after the first interval as a share of the rate
// times the intervals after the first.
func (b *bench) steadyOverload(ctx context.Context, c contender) (float64, error) {
	rate, iv := b.plan.exactRate, b.plan.exactInterval
	l, key, err := b.opened(ctx, c, "steady", rate, iv)
	if err != nil {
		return 0, err
	}
	defer b.drop(ctx, key)
	start := time.Now()
	o, err := l.run(ctx, b.plan.exactCallers, time.Duration(b.plan.steady)*iv, true)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.name, err)
	}
	from := start.Add(iv).UnixNano()
	n := len(o.stamps) - countBefore(o.stamps, from)
	return float64(n) / float64(rate*int64(b.plan.steady-1)), nil
}

// measuredWindow is the window the grants are counted in: the interval
// less 2%. A grant's stamp is the caller's clock before its call; the
// limiter's own time is read later (after a queue, a batch, a JVM's
// scheduling) and in whole milliseconds, and the sliding logs grant the
// next burst exactly one interval after the previous one, so counting in
// the full interval would charge them with that slack.
func measuredWindow(iv time.Duration) time.Duration { return iv - iv/50 }

// maxInWindow returns the most stamps (sorted, ns) in any half-open
// window [t, t+w).
func maxInWindow(stamps []int64, w time.Duration) int {
	best, j := 0, 0
	for i := range stamps {
		for stamps[i]-stamps[j] >= int64(w) {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// windowSeries samples, every interval/100 from from to to, the stamps in
// the window (t-w, t] divided by rate; x is t - t0 in intervals.
func windowSeries(stamps []int64, t0, from, to time.Time, w, iv time.Duration, rate int64) []point {
	var pts []point
	step := iv / 100
	for t := from; !t.After(to); t = t.Add(step) {
		n := countBefore(stamps, t.UnixNano()+1) - countBefore(stamps, t.Add(-w).UnixNano()+1)
		pts = append(pts, point{x: float64(t.Sub(t0)) / float64(iv), y: float64(n) / float64(rate)})
	}
	return pts
}

// countBefore returns how many sorted stamps are < t.
func countBefore(stamps []int64, t int64) int {
	i, _ := slices.BinarySearch(stamps, t)
	return i
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
