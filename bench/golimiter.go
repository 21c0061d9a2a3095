package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// goLimiter is a limiter decided in this process: one call, one decision.
type goLimiter func(ctx context.Context) (bool, error)

// run starts callers goroutines that decide as fast as they can until d
// has passed. A grant's stamp is the clock read just before its call, as
// Redisson's peer stamps its grants. The first error ends the run.
func (try goLimiter) run(ctx context.Context, callers int, d time.Duration, stamps bool) (outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := time.Now().Add(d)
	type tally struct {
		callerTally
		stamps []int64
	}
	tallies := make([]tally, callers)
	var wg sync.WaitGroup
	for i := range tallies {
		wg.Add(1)
		go func(t *tally) {
			defer wg.Done()
			var granted func(time.Time)
			if stamps {
				granted = func(start time.Time) { t.stamps = append(t.stamps, start.UnixNano()) }
			}
			decideUntil(ctx, cancel, end, try, &t.callerTally, granted)
		}(&tallies[i])
	}
	wg.Wait()
	var o outcome
	for _, t := range tallies {
		if t.err != nil {
			return outcome{}, t.err
		}
		o.decisions += t.decisions
		o.grants += t.grants
		o.stamps = append(o.stamps, t.stamps...)
	}
	slices.Sort(o.stamps)
	return o, nil
}

// callerTally is what one caller of a load loop decided.
type callerTally struct {
	decisions, grants int64
	err               error
}

// decideUntil calls try until end has passed or ctx is done, counting
// decisions and grants in t and calling granted (if not nil) with each
// grant's start, the clock read just before its call. An error stops
// it: it is kept in t and cancel ends the other callers.
func decideUntil(ctx context.Context, cancel func(), end time.Time, try func(context.Context) (bool, error), t *callerTally, granted func(start time.Time)) {
	for {
		start := time.Now()
		if !start.Before(end) || ctx.Err() != nil {
			return
		}
		ok, err := try(ctx)
		if err != nil {
			t.err = err
			cancel()
			return
		}
		t.decisions++
		if ok {
			t.grants++
			if granted != nil {
				granted(start)
			}
		}
	}
}

// latency times n sequential decisions.
func (try goLimiter) latency(ctx context.Context, n int) (latencies, error) {
	l := latencies{each: make([]time.Duration, 0, n)}
	var total time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := try(ctx); err != nil {
			return latencies{}, err
		}
		el := time.Since(start)
		l.each = append(l.each, el)
		total += el
	}
	if n > 0 {
		l.mean = total / time.Duration(n)
	}
	return l, nil
}

// once makes one decision.
func (try goLimiter) once(ctx context.Context) (bool, error) { return try(ctx) }
