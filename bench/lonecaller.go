package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// The lone-caller section: one caller, the sides interleaved call by call
// (each step calls every side once, in an order that rotates), so that a
// busy moment of a shared machine falls on every side alike. Granted
// (rate 10^9 per second) and refused (one per hour, taken) paths.

// loneSide is one side of the lone-caller section.
type loneSide struct {
	name string
	// open sets up a limiter for the path and returns its decide call.
	open func(ctx context.Context, key string, rate int64, interval time.Duration) (func(context.Context) (bool, error), error)
	// deadline: every call gets a context with a 1 s deadline (a
	// per-request context), not ctx itself.
	deadline bool
}

// loneResult is each side's latencies by path.
type loneResult struct {
	names []string
	paths []string
	p50   map[string][]time.Duration // by path, by side
	p90   map[string][]time.Duration
	p99   map[string][]time.Duration
	calls int
}

// loneSides: ours and redis_rate, each with context.Background() and with
// a per-call deadline (the context's making is in the time, on both), and
// the one-command floor.
func loneSides(rdb *redis.Client) []loneSide {
	c := ratelimiter.NewClient(rdb)
	ours := func(ctx context.Context, key string, rate int64, interval time.Duration) (func(context.Context) (bool, error), error) {
		l := c.Limiter(key)
		if _, err := l.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: rate, Interval: interval}); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (bool, error) { return l.TryAcquire(ctx, 1) }, nil
	}
	rl := redis_rate.NewLimiter(rdb)
	gcra := func(ctx context.Context, key string, rate int64, interval time.Duration) (func(context.Context) (bool, error), error) {
		lim := redis_rate.Limit{Rate: int(rate), Burst: int(rate), Period: interval}
		return func(ctx context.Context) (bool, error) {
			res, err := rl.Allow(ctx, key, lim)
			return err == nil && res.Allowed > 0, err
		}, nil
	}
	fl := func(ctx context.Context, key string, rate int64, interval time.Duration) (func(context.Context) (bool, error), error) {
		k := classic{rdb: rdb, key: key, rate: rate, interval: interval.Milliseconds()}
		return func(ctx context.Context) (bool, error) { return k.floor(ctx, time.Now().UnixMilli()) }, nil
	}
	return []loneSide{
		{name: "ratelimiter (default), context.Background()", open: ours},
		{name: "ratelimiter (default), a 1 s deadline per call", open: ours, deadline: true},
		{name: "GCRA (redis_rate v10)", open: gcra},
		{name: "GCRA (redis_rate v10), a 1 s deadline per call", open: gcra, deadline: true},
		{name: floorName, open: fl},
	}
}

// loneOnly runs the lone-caller section alone (--lone-only) and prints
// its table under the run's caption.
func (b *bench) loneOnly(ctx context.Context, o options, addr string) (*results, error) {
	b.progress("%s run of the lone-caller section alone on %s", b.plan.name, addr)
	l, err := b.loneCaller(ctx)
	if err != nil {
		return nil, err
	}
	r := &results{env: newEnvironment(serverInfo(ctx, b.rdb), "Redisson left out"), plan: b.plan}
	fmt.Fprintf(o.out, "## Lone-caller section (%s run, --lone-only)\n\n%s. One redis-server on loopback.\n", b.plan.name, r.env.caption())
	l.write(o.out)
	return r, nil
}

// loneCaller runs both paths, plan.loneCalls steps each.
func (b *bench) loneCaller(ctx context.Context) (*loneResult, error) {
	sides := loneSides(b.rdb)
	r := &loneResult{p50: map[string][]time.Duration{}, p90: map[string][]time.Duration{}, p99: map[string][]time.Duration{}, calls: b.plan.loneCalls}
	for _, s := range sides {
		r.names = append(r.names, s.name)
	}
	for _, p := range paths {
		r.paths = append(r.paths, p.name)
		each, err := b.loneRun(ctx, sides, p)
		if err != nil {
			return nil, err
		}
		for _, ds := range each {
			slices.Sort(ds)
			r.p50[p.name] = append(r.p50[p.name], quantile(ds, 0.50))
			r.p90[p.name] = append(r.p90[p.name], quantile(ds, 0.90))
			r.p99[p.name] = append(r.p99[p.name], quantile(ds, 0.99))
		}
		b.progress("lone caller, %s path: done", p.name)
	}
	return r, nil
}

// loneRun opens a limiter per side on path p and interleaves their calls.
func (b *bench) loneRun(ctx context.Context, sides []loneSide, p path) ([][]time.Duration, error) {
	calls := make([]func(context.Context) (bool, error), len(sides))
	for i, s := range sides {
		key := b.key("lone")
		defer b.drop(ctx, key)
		f, err := s.open(ctx, key, p.rate, p.interval)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		for range max(p.warm, 1) + 20 { // connections, script cache; the refused path's grant
			if _, err := f(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
		}
		calls[i] = f
	}
	each := make([][]time.Duration, len(sides))
	// The sides without a deadline get a context that can never be done,
	// as their names say: the run's own (main.go) can be interrupted, and
	// this library bounds a call whose context can end from a second
	// goroutine (combining.md), so calling with it timed that goroutine.
	never := context.WithoutCancel(ctx)
	for step := 0; step < b.plan.loneCalls; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for k := range sides {
			i := (step + k) % len(sides)
			cctx, cancel := never, context.CancelFunc(func() {})
			start := time.Now()
			if sides[i].deadline {
				cctx, cancel = context.WithTimeout(ctx, time.Second)
			}
			_, err := calls[i](cctx)
			d := time.Since(start)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", sides[i].name, err)
			}
			each[i] = append(each[i], d)
		}
	}
	return each, nil
}

// write prints the lone-caller table: p50, p90 and p99 by path, and each
// side's p50 as a ratio to redis_rate's with the same kind of context.
func (r *loneResult) write(w io.Writer) {
	fmt.Fprint(w, "\n### A lone caller, call by call\n\n")
	fmt.Fprintf(w, "One caller; %d steps per path, each step calling every side once in a rotating order "+
		"(the time of a call includes the context's making for the deadline sides); x is the ratio of p50 to redis_rate's "+
		"with the same kind of context (the floor's: to redis_rate's without a deadline). "+
		"A context that can end costs this library a second goroutine per call (combining.md): go-redis does not end a read "+
		"when its context does. "+
		"On the refused path this library answers from its local refusals (WithLocalRefusals, the default), without Redis: "+
		"its rows there time a lookup in the process, not a round trip.\n\n", r.calls)
	fmt.Fprint(w, "| path | side | p50 µs | x redis_rate | p90 µs | p99 µs |\n|---|---|---:|---:|---:|---:|\n")
	ref := slices.Index(r.names, "GCRA (redis_rate v10)")
	refDeadline := slices.Index(r.names, "GCRA (redis_rate v10), a 1 s deadline per call")
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	for _, p := range r.paths {
		for i, name := range r.names {
			base := ref
			if strings.HasSuffix(name, "a 1 s deadline per call") {
				base = refDeadline
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %.2f | %.1f | %.1f |\n", p, name, us(r.p50[p][i]),
				us(r.p50[p][i])/us(r.p50[p][base]), us(r.p90[p][i]), us(r.p99[p][i]))
		}
	}
}
