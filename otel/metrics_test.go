package ratelimiterotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	ratelimiterotel "github.com/goredisson/ratelimiter/otel"
)

// Every kind of decision lands in its series: grants with their permits,
// refusals, errors by kind, waits of the blocking calls, Redis round
// trips.
func TestMetricsRecordDecisions(t *testing.T) {
	ctx := context.Background()
	s := newSDK(t)
	name := redistest.Name(t)
	l := configured(t, s, name, ratelimiter.Config{Rate: 3, Interval: time.Hour})

	for _, n := range []int64{2, 1} {
		ok, err := l.TryAcquire(ctx, n)
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = l.Allow(ctx, 4)
	require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate)
	ok, err = l.TryAcquireTimeout(ctx, 1, 10*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.ErrorIs(t, l.Acquire(dctx, 1), context.DeadlineExceeded)

	got := s.collect(t)
	dec := got["ratelimiter.decisions {decision}"]
	require.NotNil(t, dec, "metrics: %v", got)
	at := func(op, out string) map[string]string {
		return map[string]string{"ratelimiter.name": name, "ratelimiter.operation": op, "ratelimiter.outcome": out}
	}
	require.Equal(t, int64(2), sumOf(t, dec, at("allow", "granted")))
	require.Equal(t, int64(1), sumOf(t, dec, at("allow", "refused")))
	require.Equal(t, int64(1), sumOf(t, dec, at("allow", "error")))
	require.Equal(t, int64(1), sumOf(t, dec, at("try_acquire_timeout", "refused")))
	require.Equal(t, int64(1), sumOf(t, dec, at("acquire", "error")))

	require.Equal(t, int64(3), sumOf(t, got["ratelimiter.permits.granted {permit}"],
		map[string]string{"ratelimiter.name": name, "ratelimiter.operation": "allow"}))
	errs := got["ratelimiter.errors {error}"]
	require.Equal(t, int64(1), sumOf(t, errs, map[string]string{"ratelimiter.name": name, "ratelimiter.operation": "allow", "error.type": "exceeds_rate"}))
	require.Equal(t, int64(1), sumOf(t, errs, map[string]string{"ratelimiter.name": name, "ratelimiter.operation": "acquire", "error.type": "deadline"}))

	n, sum := histCount(t, got["ratelimiter.redis.duration s"], map[string]string{"ratelimiter.name": name})
	require.Equal(t, uint64(6), n, "every acquisition that reached Redis")
	require.Positive(t, sum)
	n, _ = histCount(t, got["ratelimiter.batch.size {acquisition}"], map[string]string{"ratelimiter.name": name})
	require.Equal(t, uint64(6), n)
	n, _ = histCount(t, got["ratelimiter.wait.duration s"], at("try_acquire_timeout", "refused"))
	require.Equal(t, uint64(1), n, "only blocking calls record waits")
	n, _ = histCount(t, got["ratelimiter.wait.duration s"], at("allow", "granted"))
	require.Zero(t, n)
	// (The Client's first clock measurement runs in the background and may
	// or may not have set the offset gauge by now: TestMetricsClockOffset.)
}

// A clock measurement sets the offset gauge to the client's clock minus
// Redis TIME and counts it as large or not.
func TestMetricsClockOffset(t *testing.T) {
	ctx := context.Background()
	s := newSDK(t)
	ahead := 2 * time.Second
	l := configured(t, s, redistest.Name(t), ratelimiter.Config{Rate: 3, Interval: time.Second},
		ratelimiter.WithClock(func() time.Time { return time.Now().Add(ahead) }), ratelimiter.WithClockCheck(-1))
	_, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	c := ratelimiter.NewClient(newRedis(t), ratelimiter.WithHooks(s.m.Hooks()),
		ratelimiter.WithClock(func() time.Time { return time.Now().Add(ahead) }))
	_, err = c.Limiter(l.Name()).TryAcquire(ctx, 1) // a name for the interval
	require.NoError(t, err)
	m, err := c.MeasureClock(ctx)
	require.NoError(t, err)
	require.True(t, m.Large)

	got := s.collect(t)
	g, ok := got["ratelimiter.clock.offset s"].(metricdata.Gauge[float64])
	require.True(t, ok, "metrics: %v", got)
	require.Len(t, g.DataPoints, 1)
	require.InDelta(t, ahead.Seconds(), g.DataPoints[0].Value, 0.05)
	require.Positive(t, sumOf(t, got["ratelimiter.clock.measurements {measurement}"],
		map[string]string{"ratelimiter.clock.large": "true"}))

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.MeasureClock(cctx)
	require.Error(t, err)
	got = s.collect(t)
	require.Equal(t, int64(1), sumOf(t, got["ratelimiter.clock.measurements {measurement}"],
		map[string]string{"error.type": "canceled"}))
}

// The limiter name attribute is mapped, dropped, or bounded.
func TestMetricsLimiterNames(t *testing.T) {
	ctx := context.Background()
	cfg := ratelimiter.Config{Rate: 100, Interval: time.Hour}
	take := func(s sdk, names ...string) map[string]metricdata.Aggregation {
		for _, n := range names {
			_, err := configured(t, s, n, cfg).TryAcquire(ctx, 1)
			require.NoError(t, err)
		}
		return s.collect(t)
	}
	granted := func(name string) map[string]string {
		m := map[string]string{"ratelimiter.operation": "allow", "ratelimiter.outcome": "granted"}
		if name != "" {
			m["ratelimiter.name"] = name
		}
		return m
	}
	base := redistest.Name(t)
	a, b, c := base+"-a", base+"-b", base+"-c"

	got := take(newSDK(t, ratelimiterotel.WithMaxLimiters(2)), a, b, c, c)
	dec := got["ratelimiter.decisions {decision}"]
	require.Equal(t, int64(1), sumOf(t, dec, granted(a)))
	require.Equal(t, int64(1), sumOf(t, dec, granted(b)))
	require.Equal(t, int64(-1), sumOf(t, dec, granted(c)), "past the bound")
	require.Equal(t, int64(2), sumOf(t, dec, granted(ratelimiterotel.OtherLimiters)))

	got = take(newSDK(t, ratelimiterotel.WithoutLimiterName()), a, b)
	require.Equal(t, int64(2), sumOf(t, got["ratelimiter.decisions {decision}"], granted("")))

	got = take(newSDK(t, ratelimiterotel.WithLimiterName(func(n string) string { return n[:len(base)] })), a, b, c)
	require.Equal(t, int64(3), sumOf(t, got["ratelimiter.decisions {decision}"], granted(base)))
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []ratelimiterotel.Option{
		ratelimiterotel.WithMeterProvider(nil),
		ratelimiterotel.WithLimiterName(nil),
		ratelimiterotel.WithMaxLimiters(0),
	} {
		_, err := ratelimiterotel.New(o)
		require.Error(t, err)
	}
}

// ratelimiter.waiters is an up-down counter of blocking calls in
// progress: 1 while a caller waits on a spent limiter, 0 once it returns.
func TestMetricsWaiters(t *testing.T) {
	s := newSDK(t)
	name := redistest.Name(t)
	l := configured(t, s, name, ratelimiter.Config{Rate: 1, Interval: time.Hour})
	ok, err := l.TryAcquire(context.Background(), 1)
	require.NoError(t, err)
	require.True(t, ok)
	waiters := func() int64 {
		agg := s.collect(t)["ratelimiter.waiters {waiter}"]
		if agg == nil {
			return 0 // nothing recorded yet
		}
		sum, ok := agg.(metricdata.Sum[int64])
		require.True(t, ok, "an int64 sum")
		require.False(t, sum.IsMonotonic)
		for _, dp := range sum.DataPoints {
			if attrsOf(dp.Attributes.ToSlice()) == render(map[string]string{"ratelimiter.name": name}) {
				return dp.Value
			}
		}
		return -1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Acquire(ctx, 1) }()
	for deadline := time.Now().Add(10 * time.Second); waiters() != 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, int64(1), waiters(), "one caller waiting")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, int64(0), waiters())
}
