package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/goredisson/ratelimiter"
	ratelimiterotel "github.com/goredisson/ratelimiter/otel"
)

// costSide is one way of making a call in the caller's cost runs.
type costSide struct {
	name string
	call func() error
}

// costSample is one side's round: per call, the caller's time and what
// the process allocated.
type costSample struct {
	us, allocs, bytes float64
}

// callerCost measures what one granted TryAcquire costs the calling
// process: its time over loopback and its allocations, with a context
// that can never end (context.Background(), the reference), with a deadline (the script call then
// runs on a second goroutine, so the caller can leave at the deadline),
// with a trivial Decision hook and with the otel module's hooks on the
// real SDK. plan.costRounds rounds of plan.costCalls sequential calls,
// sides alternated, so that drift in the machine's load falls on every
// side alike.
func (b *bench) callerCost(ctx context.Context) ([]string, [][]costSample, error) {
	sides, cleanup, err := b.costSides(ctx)
	defer cleanup()
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(sides))
	out := make([][]costSample, len(sides))
	for r := 0; r < b.plan.costRounds; r++ {
		for _, i := range order(r, len(sides)) {
			s := sides[i]
			names[i] = s.name
			cs, err := costRound(s.call, b.plan.costCalls)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.name, err)
			}
			out[i] = append(out[i], cs)
		}
	}
	b.progress("caller's cost: done")
	return names, out, nil
}

// costSides sets up one limiter and a client per side.
func (b *bench) costSides(ctx context.Context) ([]costSide, func(), error) {
	key := b.key("cost")
	bg := context.Background() // can never end: the script call runs on the caller's goroutine
	dctx, cancel := context.WithTimeout(bg, time.Hour)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	cleanup := func() { cancel(); _ = mp.Shutdown(context.Background()); _ = b.drop(context.Background(), key) }
	m, err := ratelimiterotel.New(ratelimiterotel.WithMeterProvider(mp))
	if err != nil {
		return nil, cleanup, err
	}
	var grants atomic.Int64
	trivial := ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
		if d.Granted {
			grants.Add(1)
		}
	}}
	plain := ratelimiter.NewClient(b.rdb)
	if _, err := plain.Limiter(key).TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 50, Interval: time.Hour}); err != nil {
		return nil, cleanup, err
	}
	call := func(c *ratelimiter.Client, ctx context.Context) func() error {
		l := c.Limiter(key)
		return func() error {
			ok, err := l.TryAcquire(ctx, 1)
			if err == nil && !ok {
				err = fmt.Errorf("refused, want every call granted")
			}
			return err
		}
	}
	return []costSide{
		{"context.Background(), no hook", call(plain, bg)},
		{"a deadline", call(plain, dctx)},
		{"a trivial Decision hook", call(ratelimiter.NewClient(b.rdb, ratelimiter.WithHooks(trivial)), bg)},
		{"the otel module's hooks (SDK, manual reader)", call(ratelimiter.NewClient(b.rdb, ratelimiter.WithHooks(m.Hooks())), bg)},
	}, cleanup, nil
}

// costRound makes n calls and returns the time and allocations per call.
func costRound(call func() error, n int) (costSample, error) {
	if err := call(); err != nil { // a first call per round: connection, clock check
		return costSample{}, err
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := call(); err != nil {
			return costSample{}, err
		}
	}
	el := time.Since(start)
	runtime.ReadMemStats(&after)
	return costSample{
		us:     float64(el.Nanoseconds()) / 1e3 / float64(n),
		allocs: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
	}, nil
}

func (r *results) costTable(w io.Writer) {
	fmt.Fprintf(w, "### The caller's cost of one TryAcquire\n\nOne caller, granted calls over loopback with the default "+
		"client (each call a batch of one); time per call, and the allocations and bytes the whole process made per call "+
		"(runtime.MemStats); %d rounds of %d calls, sides alternated, medians; each row differs from the first in one "+
		"thing, and the difference is the row's value less the first row's in this run.\n\n", r.plan.costRounds, r.plan.costCalls)
	fmt.Fprint(w, "| TryAcquire with | µs per call | difference, µs | allocations per call | bytes per call |\n|---|---:|---:|---:|---:|\n")
	m := func(i int, f func(costSample) float64) float64 { return median(pick(r.cost[i], f)) }
	us := func(s costSample) float64 { return s.us }
	for i, name := range r.costNames {
		diff := "—"
		if i > 0 {
			diff = fmt.Sprintf("%+.1f", m(i, us)-m(0, us))
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %.1f | %s |\n", name, m(i, us), diff,
			m(i, func(s costSample) float64 { return s.allocs }), group(m(i, func(s costSample) float64 { return s.bytes }), 0))
	}
	fmt.Fprintln(w)
}
