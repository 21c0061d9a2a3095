package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/goredisson/ratelimiter"
)

// multiCase is one decision over k limits, every part granting or every
// part full.
type multiCase struct {
	k       int
	granted bool
}

func (c multiCase) String() string {
	if c.granted {
		return fmt.Sprintf("k=%d, granted", c.k)
	}
	return fmt.Sprintf("k=%d, refused", c.k)
}

var multiCases = []multiCase{{2, true}, {2, false}, {3, true}, {3, false}}

// multiSample is one round of one case: per decision, the Redis time
// inside the script calls and the caller's time, of one composite call
// (Client.All) and of k separate TryAcquire calls.
type multiSample struct {
	compRedis, sepRedis   float64 // µs
	compCaller, sepCaller float64 // µs
}

// multiLimits measures what one decision over k limits costs made as one
// composite call against k separate calls, on a client without combining
// (one script call per call), in plan.multiRounds rounds that alternate
// the two. It fails unless the composite makes one script call per
// decision and the separate calls k.
func (b *bench) multiLimits(ctx context.Context) ([][]multiSample, error) {
	// Local refusals off: the refused rows measure the scripts, which a
	// Client's first refusal of an ask still runs.
	c := ratelimiter.NewClient(b.rdb, ratelimiter.WithMaxBatch(1), ratelimiter.WithLocalRefusals(false))
	out := make([][]multiSample, len(multiCases))
	for i, mc := range multiCases {
		key := b.key("multi")
		ss, err := b.multiCase(ctx, c, key, mc)
		if err := errors.Join(err, b.drop(ctx, key)); err != nil {
			return nil, fmt.Errorf("composite %v: %w", mc, err)
		}
		out[i] = ss
	}
	b.progress("composites: done")
	return out, nil
}

func (b *bench) multiCase(ctx context.Context, c *ratelimiter.Client, key string, mc multiCase) ([]multiSample, error) {
	var parts []*ratelimiter.Limiter
	var names []string
	for p := 0; p < mc.k; p++ {
		l := c.Limiter(fmt.Sprintf("%s-p%d", key, p))
		cfg := ratelimiter.Config{Rate: 1 << 50, Interval: time.Hour}
		if !mc.granted {
			cfg.Rate = 1
		}
		if err := l.SetRate(ctx, cfg); err != nil {
			return nil, err
		}
		if !mc.granted {
			if _, err := l.TryAcquire(ctx, 1); err != nil {
				return nil, err
			}
		}
		parts, names = append(parts, l), append(names, l.Name())
	}
	all := c.All(names...)
	composite := func() (bool, error) { return all.TryAcquire(ctx, 1) }
	// Every part is asked, as the composite asks every part (chained
	// calls would stop at the first refusal, after taking the earlier
	// parts' permits).
	separate := func() (bool, error) {
		all := true
		for _, l := range parts {
			ok, err := l.TryAcquire(ctx, 1)
			if err != nil {
				return false, err
			}
			all = all && ok
		}
		return all, nil
	}
	for _, decide := range []func() (bool, error){composite, separate} {
		if _, err := decide(); err != nil { // loads the scripts (a first EVALSHA fails and EVAL follows)
			return nil, err
		}
	}
	var out []multiSample
	for r := 0; r < b.plan.multiRounds; r++ {
		var s multiSample
		for _, i := range order(r, 2) {
			var err error
			if i == 0 {
				s.compRedis, s.compCaller, err = b.multiRound(ctx, composite, mc.granted, 1)
			} else {
				s.sepRedis, s.sepCaller, err = b.multiRound(ctx, separate, mc.granted, mc.k)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// multiRound makes plan.multiCalls decisions with decide and returns the
// Redis time in script calls and the caller's time per decision, in µs.
func (b *bench) multiRound(ctx context.Context, decide func() (bool, error), granted bool, scriptsPer int) (float64, float64, error) {
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, 0, err
	}
	n := b.plan.multiCalls
	start := time.Now()
	for i := 0; i < n; i++ {
		ok, err := decide()
		if err != nil {
			return 0, 0, err
		}
		if ok != granted {
			return 0, 0, fmt.Errorf("granted = %v, want %v", ok, granted)
		}
	}
	wall := time.Since(start)
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, 0, err
	}
	d := after.sub(before)
	if d.scriptCalls != int64(scriptsPer*n) {
		return 0, 0, fmt.Errorf("%d script calls for %d decisions, want %d each", d.scriptCalls, n, scriptsPer)
	}
	return float64(d.scriptUsec) / float64(n), float64(wall.Microseconds()) / float64(n), nil
}

func (r *results) multiTable(w io.Writer) {
	fmt.Fprintf(w, "### Several limits at once: one composite call against k separate calls\n\n"+
		"This library without combining (one script call per call): Client.All over k limiters, against TryAcquire "+
		"on each of the k (every part asked, as the composite asks every part); refused: every part is full. "+
		"%d rounds of %d decisions, the two alternated, medians; Redis time inside the script calls from "+
		"INFO commandstats, the caller's time over loopback; (x) is composite / separate.\n\n", r.plan.multiRounds, r.plan.multiCalls)
	fmt.Fprint(w, "| decision over | Redis µs, composite | Redis µs, k calls | caller's µs, composite | caller's µs, k calls |\n|---|---:|---:|---:|---:|\n")
	for i, mc := range multiCases {
		ss := r.multi[i]
		m := func(f func(multiSample) float64) float64 { return median(pick(ss, f)) }
		cr, sr := m(func(s multiSample) float64 { return s.compRedis }), m(func(s multiSample) float64 { return s.sepRedis })
		cc, sc := m(func(s multiSample) float64 { return s.compCaller }), m(func(s multiSample) float64 { return s.sepCaller })
		fmt.Fprintf(w, "| %v | %s | %s | %s | %s |\n", mc, withRatio(cr, sr, 1), group(sr, 1), withRatio(cc, sc, 1), group(sc, 1))
	}
	fmt.Fprintln(w)
}
