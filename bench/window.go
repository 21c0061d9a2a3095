package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// windowSide is one series of the Redis-time-by-window runs: this
// library with a window of records, or the floor.
type windowSide struct {
	name   string
	decide func(ctx context.Context) (bool, error)
}

// windowTime measures the Redis time inside the script call of one
// granted TryAcquire when the window holds each of plan.windowRecords
// records, next to the floor's one-command script, in plan.costRounds
// rounds of plan.costCalls sequential calls that alternate the sides. The
// clock is frozen (WithClock), so no record leaves the window: the cost
// of a call could grow only with the records it holds.
func (b *bench) windowTime(ctx context.Context) ([]string, [][]float64, error) {
	start := time.Now()
	c := ratelimiter.NewClient(b.rdb, ratelimiter.WithClock(func() time.Time { return start }), ratelimiter.WithServerClock(false))
	var sides []windowSide
	for _, n := range b.plan.windowRecords {
		l := c.Limiter(b.key("window"))
		defer b.drop(context.Background(), l.Name())
		if err := fillWindow(ctx, b.rdb, l, n, start, time.Hour); err != nil {
			return nil, nil, err
		}
		sides = append(sides, windowSide{fmt.Sprintf("ratelimiter, %s records in the window", group(float64(n), 0)),
			func(ctx context.Context) (bool, error) { return l.TryAcquire(ctx, 1) }})
	}
	fl, key, err := b.opened(ctx, floor(b.rdb), "window-floor", 1, time.Hour)
	if err != nil {
		return nil, nil, err
	}
	defer b.drop(context.Background(), key)
	sides = append(sides, windowSide{floorName, fl.once})

	names := make([]string, len(sides))
	out := make([][]float64, len(sides))
	for r := 0; r < b.plan.costRounds; r++ {
		for _, i := range order(r, len(sides)) {
			s := sides[i]
			names[i] = s.name
			us, err := b.scriptTime(ctx, s.decide, b.plan.costCalls)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.name, err)
			}
			out[i] = append(out[i], us)
		}
	}
	b.progress("Redis time by window: done")
	return names, out, nil
}

// scriptTime makes n sequential granted decisions and returns the Redis
// time inside script calls per decision, in µs.
func (b *bench) scriptTime(ctx context.Context, decide func(context.Context) (bool, error), n int) (float64, error) {
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, err
	}
	for i := 0; i < n; i++ {
		ok, err := decide(ctx)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("refused, want every call granted")
		}
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, err
	}
	return float64(after.sub(before).scriptUsec) / float64(n), nil
}

// fillWindow sets l to a rate of 2^50 per window and writes records
// worth one permit each into its window ending at now, spread evenly.
func fillWindow(ctx context.Context, rdb *redis.Client, l *ratelimiter.Limiter, records int, now time.Time, window time.Duration) error {
	const rate = 1 << 50
	if err := l.SetRate(ctx, ratelimiter.Config{Rate: rate, Interval: window}); err != nil {
		return err
	}
	k := wire.KeysFor(l.Name(), "") // l's Client maps no names; the OVERALL keys only
	zs := make([]redis.Z, 0, 1000)
	for i := 0; i < records; i++ {
		m, err := wire.Encode(wire.Bc0I, []byte(fmt.Sprintf("%016d", i)), 1)
		if err != nil {
			return err
		}
		at := now.Add(-window + time.Duration(i+1)*window/time.Duration(records+1))
		zs = append(zs, redis.Z{Score: float64(at.UnixMilli()), Member: m})
		if len(zs) == cap(zs) || i == records-1 {
			if err := rdb.ZAdd(ctx, k.Permits, zs...).Err(); err != nil {
				return err
			}
			zs = zs[:0]
		}
	}
	return rdb.Set(ctx, k.Value, rate-records, 0).Err()
}

func (r *results) windowTable(w io.Writer) {
	fmt.Fprintf(w, "### Redis time by records in the window\n\nOne caller, granted TryAcquire on a limiter whose window "+
		"holds the records shown (written beforehand, the clock frozen so none leaves), next to the one-command script; "+
		"Redis time inside the script call per call from INFO commandstats; %d rounds of %d calls, sides alternated, "+
		"medians; (x) is the ratio to the first row.\n\n", r.plan.costRounds, r.plan.costCalls)
	fmt.Fprint(w, "| calls on | Redis µs in the script call |\n|---|---:|\n")
	for i, name := range r.windowNames {
		fmt.Fprintf(w, "| %s | %s |\n", name, withRatio(median(r.window[i]), median(r.window[0]), 2))
	}
	fmt.Fprintln(w)
}
