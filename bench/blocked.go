package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goredisson/ratelimiter"
)

// blockedSample is one run of callers blocked in acquire(1).
type blockedSample struct {
	grants  int64
	allowed int64 // what the limit allowed over the run: rate x (1 + whole intervals elapsed)
	scripts int64 // script calls Redis ran meanwhile
}

// blockedResult holds, for each contender that can block (names), its
// runs.
type blockedResult struct {
	names   []string
	samples [][]blockedSample
}

// blocked has plan.blockedCallers callers block in acquire(1) on a fresh
// limiter of plan.blockedRate per second for plan.blockedRun, every
// contender that can block in turn, plan.rounds rounds, and counts the
// script calls Redis ran per grant: what combining's one queue and one
// timer per limiter save against a sleep and a call per waiter.
func (b *bench) blocked(ctx context.Context) (blockedResult, error) {
	var res blockedResult
	var cs []contender
	for _, c := range b.cs {
		if c.blocking != nil {
			cs = append(cs, c)
			res.names = append(res.names, c.name)
		}
	}
	res.samples = make([][]blockedSample, len(cs))
	for r := 0; r < b.plan.rounds; r++ {
		for _, i := range order(r, len(cs)) {
			c := cs[i]
			s, err := b.blockedRun(ctx, c)
			if err != nil {
				return blockedResult{}, err
			}
			res.samples[i] = append(res.samples[i], s)
		}
	}
	b.progress("blocked callers: done")
	return res, nil
}

func (b *bench) blockedRun(ctx context.Context, c contender) (blockedSample, error) {
	_, key, err := b.opened(ctx, c, "blocked", b.plan.blockedRate, time.Second)
	if err != nil {
		return blockedSample{}, err
	}
	defer b.drop(ctx, key)
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return blockedSample{}, err
	}
	start := time.Now()
	grants, err := c.blocking(ctx, key, b.plan.blockedCallers, b.plan.blockedRun)
	if err != nil {
		return blockedSample{}, fmt.Errorf("%s: blocked callers: %w", c.name, err)
	}
	elapsed := time.Since(start)
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return blockedSample{}, err
	}
	return blockedSample{grants: grants, allowed: b.plan.blockedRate * (1 + int64(elapsed/time.Second)),
		scripts: after.sub(before).scriptCalls}, nil
}

// acquireLoop runs callers goroutines that Acquire(1) until d has passed;
// it returns the grants. A caller blocked at d leaves without a grant.
func acquireLoop(ctx context.Context, l *ratelimiter.Limiter, callers int, d time.Duration) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := l.Acquire(rctx, 1)
				if err != nil {
					// The end of the run: rctx done, or a wait that
					// would pass its deadline (context.DeadlineExceeded
					// at once).
					if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
						errs[i] = err
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return n.Load(), nil
}

func (r *results) blockedTable(w io.Writer) {
	fmt.Fprintf(w, "### Blocked callers\n\n%d callers in acquire(1) on one limiter of %d per second for %v, "+
		"%d round(s), contenders alternated, medians. A Go caller whose wait would pass the end leaves at once, so "+
		"the Go runs end after the last interval that fits; Redisson's threads blocked at the end return with one more "+
		"grant each, so its runs last longer. Script calls from INFO commandstats; what the limit allowed: the rate "+
		"x (1 + whole seconds the run took).\n\n",
		r.plan.blockedCallers, r.plan.blockedRate, r.plan.blockedRun, r.plan.rounds)
	fmt.Fprint(w, "| contender | grants | grants / what the limit allowed | script calls | script calls per grant |\n|---|---:|---:|---:|---:|\n")
	perGrant := func(i int) float64 {
		return median(pick(r.blocked.samples[i], func(s blockedSample) float64 {
			return float64(s.scripts) / float64(max(s.grants, 1))
		}))
	}
	for i, name := range r.blocked.names {
		ss := r.blocked.samples[i]
		fmt.Fprintf(w, "| %s | %s | %.2f | %s | %s |\n", name,
			group(median(pick(ss, func(s blockedSample) float64 { return float64(s.grants) })), 0),
			median(pick(ss, func(s blockedSample) float64 { return float64(s.grants) / float64(max(s.allowed, 1)) })),
			group(median(pick(ss, func(s blockedSample) float64 { return float64(s.scripts) })), 0),
			withRatio(perGrant(i), perGrant(0), 3))
	}
	fmt.Fprintln(w)
}
