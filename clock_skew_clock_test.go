package ratelimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// skews collects what the ClockSkew hook reports.
func skews() (chan ratelimiter.ClockSkew, ratelimiter.Option) {
	ch := make(chan ratelimiter.ClockSkew, 100)
	return ch, ratelimiter.WithHooks(ratelimiter.Hooks{ClockSkew: func(m ratelimiter.ClockSkew) {
		select {
		case ch <- m:
		default:
		}
	}})
}

func nextSkew(t *testing.T, ch chan ratelimiter.ClockSkew) ratelimiter.ClockSkew {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no clock measurement reported in 10s")
	}
	return ratelimiter.ClockSkew{}
}

// aheadBy is a clock that runs d ahead of this machine's, which Redis on
// loopback shares.
func aheadBy(d time.Duration) ratelimiter.Option {
	return ratelimiter.WithClock(func() time.Time { return time.Now().Add(d) })
}

// The first acquisition starts a measurement in the background; the hook
// gets the offset of the client's clock (WithClock) from Redis TIME, the
// shortest interval of the limiters the client used, and whether the
// offset is large against it.
func TestClockSkewMeasuredAtFirstUse(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		ahead time.Duration
		large bool
	}{
		{700 * time.Millisecond, true},
		{-300 * time.Millisecond, true},
		{0, false},
	} {
		ch, hooks := skews()
		c := ratelimiter.NewClient(newRedis(t), aheadBy(tc.ahead), hooks)
		_, ok := ratelimiter.LastClockSkew(c)
		require.False(t, ok, "no measurement before the first acquisition")
		l := c.Limiter(uniqueName(t))
		_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second})
		require.NoError(t, err)
		_, err = l.TryAcquire(ctx, 1)
		require.NoError(t, err)

		m := nextSkew(t, ch)
		require.NoError(t, m.Err)
		require.InDelta(t, float64(tc.ahead), float64(m.Offset), float64(m.Uncertainty+2*time.Millisecond),
			"offset %v ± %v, clock ahead by %v", m.Offset, m.Uncertainty, tc.ahead)
		require.Equal(t, time.Second, m.Interval)
		require.Equal(t, tc.large, m.Large, "offset %v against a 1s interval", m.Offset)
		last, ok := ratelimiter.LastClockSkew(c)
		require.True(t, ok)
		require.Equal(t, m, last)
	}
}

// A fake clock that stands still is measured as itself minus Redis time.
// A Client used only through a composite (as every WithRules middleware
// does) weighs the skew against its parts' intervals: the shortest part's.
func TestClockSkewThroughComposite(t *testing.T) {
	ctx := context.Background()
	ch, hooks := skews()
	c := ratelimiter.NewClient(newRedis(t), aheadBy(700*time.Millisecond), hooks)
	setup := ratelimiter.NewClient(newRedis(t))
	a, b := uniqueName(t)+"-s", uniqueName(t)+"-h"
	for name, iv := range map[string]time.Duration{a: time.Second, b: time.Hour} {
		_, err := setup.Limiter(name).TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: iv})
		require.NoError(t, err)
	}
	_, err := c.All(a, b).TryAcquire(ctx, 1)
	require.NoError(t, err)
	m := nextSkew(t, ch)
	require.NoError(t, m.Err)
	require.Equal(t, time.Second, m.Interval, "the shortest part's interval")
	require.True(t, m.Large, "offset %v against a 1s interval", m.Offset)
}

func TestClockSkewFakeClock(t *testing.T) {
	clock := newFakeClock()
	clock.Advance(-2 * time.Second)
	ch, hooks := skews()
	c := ratelimiter.NewClient(newRedis(t), clock.option(), hooks)
	before := time.Now()
	m, err := c.MeasureClock(context.Background())
	require.NoError(t, err)
	after := time.Now()
	require.Equal(t, m, nextSkew(t, ch), "MeasureClock reports to the hook")
	// Redis shares this machine's clock: its TIME lies between before and after.
	require.LessOrEqual(t, clock.Now().Sub(after), m.Offset)
	require.GreaterOrEqual(t, clock.Now().Sub(before), m.Offset)
	require.Zero(t, m.Interval, "no limiter used yet")
	require.False(t, m.Large)
}

// With a short period, acquisitions keep measuring, one measurement at a
// time.
func TestClockSkewRemeasured(t *testing.T) {
	ctx := context.Background()
	ch, hooks := skews()
	c := ratelimiter.NewClient(newRedis(t), hooks, ratelimiter.WithClockCheck(20*time.Millisecond))
	l := c.Limiter(uniqueName(t))
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1000, Interval: time.Minute})
	require.NoError(t, err)
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < 3 && time.Now().Before(deadline) {
		_, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err)
		select {
		case m := <-ch:
			require.NoError(t, m.Err)
			require.Equal(t, time.Minute, m.Interval)
			got++
		case <-time.After(5 * time.Millisecond):
		}
	}
	require.Equal(t, 3, got, "measurements reported in 10s of acquisitions")
}

// MeasureClock honours its context and reports the failure; an invalid
// client fails before sending anything.
func TestMeasureClockErrors(t *testing.T) {
	ch, hooks := skews()
	c := ratelimiter.NewClient(newRedis(t), hooks, ratelimiter.WithClockCheck(-1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.MeasureClock(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, nextSkew(t, ch).Err, context.Canceled)
	_, ok := ratelimiter.LastClockSkew(c)
	require.False(t, ok, "a failed measurement leaves no offset")

	_, err = ratelimiter.NewClient(nil).MeasureClock(context.Background())
	require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
}
