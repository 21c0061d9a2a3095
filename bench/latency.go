package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// latencySample is one contender's series of sequential calls.
type latencySample struct {
	p50, p99, mean time.Duration // p50 and p99 are 0 when unknown
}

// latency times plan.latencyCalls sequential granted calls per contender
// and round, contenders alternated; many short rounds, so that a busy
// moment of a shared machine falls on one contender's round only.
func (b *bench) latency(ctx context.Context) ([][]latencySample, error) {
	all := make([][]latencySample, len(b.cs))
	for r := 0; r < b.plan.latencyRounds; r++ {
		for _, i := range order(r, len(b.cs)) {
			c := b.cs[i]
			s, err := b.latencyRun(ctx, c)
			if err != nil {
				return nil, err
			}
			all[i] = append(all[i], s)
		}
	}
	b.progress("latency: done")
	return all, nil
}

func (b *bench) latencyRun(ctx context.Context, c contender) (latencySample, error) {
	l, key, err := b.opened(ctx, c, "lat", 1_000_000_000, time.Second)
	if err != nil {
		return latencySample{}, err
	}
	defer b.drop(ctx, key)
	s, err := latencyOf(ctx, l, b.plan.latencyCalls)
	if err != nil {
		return latencySample{}, fmt.Errorf("%s: %w", c.name, err)
	}
	return s, nil
}

// latencyOf times n sequential calls of l after 20 untimed ones and
// returns their p50, p99 and mean.
func latencyOf(ctx context.Context, l limiter, n int) (latencySample, error) {
	if _, err := l.latency(ctx, 20); err != nil { // connections, script cache
		return latencySample{}, err
	}
	ls, err := l.latency(ctx, n)
	if err != nil {
		return latencySample{}, err
	}
	s := latencySample{mean: ls.mean}
	if len(ls.each) > 0 {
		slices.Sort(ls.each)
		s.p50 = quantile(ls.each, 0.50)
		s.p99 = quantile(ls.each, 0.99)
	}
	return s, nil
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile[T any](sorted []T, q float64) T {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
