package ratelimiter_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

func TestAcquireFirstUse(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []ratelimiter.Mode{ratelimiter.Overall, ratelimiter.PerClient} {
		t.Run(mode.String(), func(t *testing.T) {
			l, rdb, clock := setup(t, ratelimiter.Config{Mode: mode, Rate: 10, Interval: time.Second})
			ok, err := l.TryAcquire(ctx, 3)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "7", rdb.Get(ctx, valueKey(l, mode)).Val())

			recs := rdb.ZRangeWithScores(ctx, permitsKey(l, mode), 0, -1).Val()
			require.Len(t, recs, 1)
			require.Equal(t, float64(clock.Millis()), recs[0].Score, "score is the client clock in ms")
			m := []byte(recs[0].Member.(string))
			require.Len(t, m, 21)
			require.Equal(t, byte(16), m[0])
			require.Equal(t, uint32(3), binary.LittleEndian.Uint32(m[17:]))

			other := map[ratelimiter.Mode]ratelimiter.Mode{ratelimiter.Overall: ratelimiter.PerClient, ratelimiter.PerClient: ratelimiter.Overall}[mode]
			require.Equal(t, int64(0), rdb.Exists(ctx, valueKey(l, other), permitsKey(l, other)).Val())
		})
	}
}

func TestAcquireMemberFormats(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		f     wire.Format
		check func(t *testing.T, m []byte)
	}{
		{wire.Bc0I, func(t *testing.T, m []byte) {
			require.Len(t, m, 21)
			require.Equal(t, byte(16), m[0])
		}},
		{wire.Lc0I, func(t *testing.T, m []byte) {
			n := binary.LittleEndian.Uint64(m)
			require.Equal(t, uint64(len(m)-12), n)
			require.Regexp(t, `^GoRL[0-9a-f]{8}-?[0-9]{1,19}$`, string(m[8:8+n]))
		}},
		{wire.FI, func(t *testing.T, m []byte) { require.Len(t, m, 8) }},
	} {
		t.Run(tc.f.String(), func(t *testing.T) {
			l, rdb, _ := setup(t, ratelimiter.Config{Rate: 1 << 40, Interval: time.Second}, ratelimiter.WithMemberFormat(tc.f))
			for _, n := range []int64{1, 300, ratelimiter.MaxPermits} {
				ok, err := l.TryAcquire(ctx, n)
				require.NoError(t, err)
				require.True(t, ok)
			}
			recs := rdb.ZRange(ctx, l.Keys().Permits, 0, -1).Val()
			require.Len(t, recs, 3)
			var counts []uint32
			for _, r := range recs {
				m := []byte(r)
				tc.check(t, m)
				counts = append(counts, binary.LittleEndian.Uint32(m[len(m)-4:]))
				d, err := wire.Decode(m)
				require.NoError(t, err)
				require.Equal(t, tc.f, d.Format)
			}
			require.ElementsMatch(t, []uint32{1, 300, ratelimiter.MaxPermits}, counts)
			require.Equal(t, int64(1<<40-1-300-ratelimiter.MaxPermits), mustInt(t, rdb.Get(ctx, l.Keys().Value)))
		})
	}
}

func mustInt(t *testing.T, cmd *redis.StringCmd) int64 {
	t.Helper()
	v, err := cmd.Int64()
	require.NoError(t, err)
	return v
}

func TestAcquireRefusedWithHint(t *testing.T) {
	ctx := context.Background()
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 5, Interval: 10 * time.Second})
	_, err := l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	clock.Advance(4 * time.Second)
	_, err = l.TryAcquire(ctx, 3)
	require.NoError(t, err)
	clock.Advance(time.Second)

	before := snapshot(t, rdb, l)
	res, err := l.Allow(ctx, 1)
	require.NoError(t, err)
	require.False(t, res.Granted)
	// 3 + interval - (now - oldest) = 3 + 10000 - 5000.
	require.Equal(t, 5003*time.Millisecond, res.RetryAfter)
	require.Equal(t, int64(0), res.Remaining)
	require.Equal(t, before, snapshot(t, rdb, l), "a refusal with nothing expired changes nothing")

	// Once the oldest record expires its 2 permits come back; what a
	// refusal and a grant report as remaining is what Redis stores.
	clock.Advance(5 * time.Second)
	res, err = l.Allow(ctx, 3)
	require.NoError(t, err)
	require.False(t, res.Granted)
	require.Equal(t, "2", rdb.Get(ctx, l.Keys().Value).Val())
	require.Equal(t, int64(2), res.Remaining, "a refusal reports what is available")
	res, err = l.Allow(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.Result{Granted: true, Limit: 5, Interval: 10 * time.Second, Remaining: 0,
		ResetAfter: 4 * time.Second}, res, "the oldest record left, taken at 4 s, expires at 14 s")
	require.Equal(t, "0", rdb.Get(ctx, l.Keys().Value).Val())
	require.Equal(t, int64(2), rdb.ZCard(ctx, l.Keys().Permits).Val())
}

func TestAcquireExpiryBoundary(t *testing.T) {
	ctx := context.Background()
	l, _, clock := setup(t, ratelimiter.Config{Rate: 1, Interval: time.Second})
	ok, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	clock.Advance(999 * time.Millisecond)
	res, err := l.Allow(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 4*time.Millisecond, res.RetryAfter)
	clock.Advance(time.Millisecond)
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok, "a record with score <= now - interval is released")
}

// TestReleaseNeverLiftsLaterWindows is issue 14's first defect: rate 10/s,
// take 10 at t=0, at t=500 release 5 and take 5, then take until refused
// every 500 ms. Before the fix, the released permits came back a second
// time when their records expired, and every later 1 s window held 15
// grants.
func TestReleaseNeverLiftsLaterWindows(t *testing.T) {
	ctx := context.Background()
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
	start := clock.Millis()
	grants := map[int64]int64{} // ms since start -> permits granted then
	take := func(n int64) bool {
		ok, err := l.TryAcquire(ctx, n)
		require.NoError(t, err)
		if ok {
			grants[clock.Millis()-start] += n
		}
		return ok
	}
	require.True(t, take(10))
	clock.Advance(500 * time.Millisecond)
	require.NoError(t, l.Release(ctx, 5))
	grants[500] -= 5 // given back: those permits were not used
	require.Equal(t, int64(5), recordPermits(t, rdb, l.Keys().Permits), "the release took 5 out of the records")
	require.True(t, take(5))
	for step := 0; step < 10; step++ {
		clock.Advance(500 * time.Millisecond)
		for take(1) {
		}
	}
	for from := int64(0); from <= 5000; from += 500 {
		var sum int64
		for at, n := range grants {
			if at >= from && at < from+1000 {
				sum += n
			}
		}
		require.LessOrEqual(t, sum, int64(10), "window [%d, %d) ms: %v", from, from+1000, grants)
	}
	// Repeated releases add nothing either.
	for i := 0; i < 5; i++ {
		require.NoError(t, l.Release(ctx, 3))
		require.True(t, take(3))
	}
	clock.Advance(time.Second)
	n := int64(0)
	for take(1) {
		n++
	}
	require.Equal(t, int64(10), n, "one interval later exactly the rate is available")
}

func TestAcquireErrors(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	_, err := l.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized)
	require.NoError(t, rdb.HSet(ctx, l.Keys().Config, "rate", 3).Err())
	_, err = l.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized, "interval and type missing")

	_, err = l.TrySetRate(ctx, ratelimiter.Config{Rate: 3, Interval: time.Second})
	require.NoError(t, err)
	before := snapshot(t, rdb, l)
	_, err = l.TryAcquire(ctx, 4)
	require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate)
	require.Equal(t, before, snapshot(t, rdb, l))
}

func TestPermitValidation(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	l := ratelimiter.NewClient(rdb).Limiter("x")
	for _, n := range []int64{0, -1, ratelimiter.MaxPermits + 1} {
		_, err := l.TryAcquire(ctx, n)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, n)
		_, err = l.Allow(ctx, n)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, n)
		_, err = l.TryAcquireTimeout(ctx, n, time.Second)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, n)
		require.ErrorIs(t, l.Acquire(ctx, n), ratelimiter.ErrInvalidArgument, n)
	}
	_, err := l.TryAcquireTimeout(ctx, 1, -time.Second)
	require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	for _, n := range []int64{-1, ratelimiter.MaxPermits + 1} {
		require.ErrorIs(t, l.Release(ctx, n), ratelimiter.ErrInvalidArgument, n)
	}
	require.NoError(t, l.Release(ctx, 0), "0 sends nothing")

	for _, bad := range []*ratelimiter.Limiter{
		ratelimiter.NewClient(rdb).Limiter(""),
		ratelimiter.NewClient(rdb, ratelimiter.WithNameMapper(func(string) string { return "" })).Limiter("x"),
		ratelimiter.NewClient(rdb, ratelimiter.WithClientID("")).Limiter("x"),
		ratelimiter.NewClient(rdb, ratelimiter.WithNameMapper(nil)).Limiter("x"),
		ratelimiter.NewClient(rdb, ratelimiter.WithClock(nil)).Limiter("x"),
		ratelimiter.NewClient(rdb, ratelimiter.WithMemberFormat(7)).Limiter("x"),
		ratelimiter.NewClient(nil).Limiter("x"),
	} {
		_, err := bad.TryAcquire(ctx, 1)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
		_, err = bad.Exists(ctx)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
		_, err = bad.Config(ctx)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	}
}

// TestAcquireConcurrentExact: with time standing still, concurrent callers
// are granted exactly the rate, never more.
func TestAcquireConcurrentExact(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 100, Interval: time.Minute})
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				ok, err := l.TryAcquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(100), granted.Load())
	require.Equal(t, "0", rdb.Get(ctx, l.Keys().Value).Val())
	require.Equal(t, int64(100), recordPermits(t, rdb, l.Keys().Permits), "the records hold every grant")
}

func TestAcquireSurvivesScriptFlush(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 5, Interval: time.Second})
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	ok, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestTryAcquireTimeoutGivesUpAtOnce(t *testing.T) {
	ctx := context.Background()
	l, _, _ := setup(t, ratelimiter.Config{Rate: 1, Interval: time.Hour})
	ok, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	// The hint is an hour: neither call may wait for it.
	start := time.Now()
	ok, err = l.TryAcquireTimeout(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = l.Acquire(dctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, dctx.Err(), "returned before the deadline")
	ok, err = l.TryAcquireTimeout(dctx, 1, 2*time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ok)
	require.Less(t, time.Since(start), 30*time.Second)
}

func TestAcquireWaitsForHint(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 2, Interval: 150 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	for i := 0; i < 6; i++ {
		require.NoError(t, l.Acquire(ctx, 1))
	}
	// Six permits at two per 150 ms cannot all come before two intervals.
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	ok, err := l.TryAcquireTimeout(ctx, 2, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestAcquireCancelWhileWaiting(t *testing.T) {
	ctx := context.Background()
	l, _, _ := setup(t, ratelimiter.Config{Rate: 1, Interval: time.Hour})
	_, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	_, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)

	// The wait (an hour) ends with the cancellation; there is no deadline
	// for the limiter to give up on early.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Acquire(cctx, 1) }()
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire did not return after cancellation")
	}
	// Already done: nothing is sent.
	require.True(t, errors.Is(l.Acquire(cctx, 1), context.Canceled))
}

// TestWaitsLeakNoGoroutines: waits that end by grant, cancellation or an
// early deadline leave no goroutine behind.
func TestWaitsLeakNoGoroutines(t *testing.T) {
	ctx := context.Background()
	l, _, _ := setup(t, ratelimiter.Config{Rate: 1, Interval: time.Hour})
	_, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	before := runtime.NumGoroutine()

	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(2)
		cctx, cancel := context.WithCancel(ctx)
		go func() { defer wg.Done(); _ = l.Acquire(cctx, 1) }()
		go func() { defer wg.Done(); cancel() }()
		dctx, dcancel := context.WithTimeout(ctx, time.Minute)
		_ = l.Acquire(dctx, 1)
		dcancel()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

func TestNilOption(t *testing.T) {
	l := ratelimiter.NewClient(newRedis(t), nil).Limiter("x")
	_, err := l.TryAcquire(context.Background(), 1)
	require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
}

// TestDeadlineBoundsStalledRedis: a Redis that stops answering (here a
// listener that accepts and never replies, on a client without
// ContextTimeoutEnabled and with long socket timeouts) does not hold a
// call past its context's deadline.
func TestDeadlineBoundsStalledRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
	defer rdb.Close()
	l := ratelimiter.NewClient(rdb).Limiter("stalled")

	calls := map[string]func(ctx context.Context) error{
		"TryAcquire": func(ctx context.Context) error { _, err := l.TryAcquire(ctx, 1); return err },
		"Acquire":    func(ctx context.Context) error { return l.Acquire(ctx, 1) },
		"SetRate": func(ctx context.Context) error {
			return l.SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Second})
		},
		"Config": func(ctx context.Context) error { _, err := l.Config(ctx); return err },
		"Exists": func(ctx context.Context) error { _, err := l.Exists(ctx); return err },
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		require.Less(t, time.Since(start), 30*time.Second, name) // not the minute-long read timeout
	}
}

func TestAllowRemaining(t *testing.T) {
	ctx := context.Background()
	l, _, _ := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Minute})
	for _, want := range []int64{7, 4, 1} {
		res, err := l.Allow(ctx, 3)
		require.NoError(t, err)
		require.Equal(t, ratelimiter.Result{Granted: true, Limit: 10, Interval: time.Minute, Remaining: want,
			ResetAfter: time.Minute}, res)
	}
	res, err := l.Allow(ctx, 3)
	require.NoError(t, err)
	require.False(t, res.Granted)
	require.Equal(t, int64(1), res.Remaining, "a refusal reports what is available")
	require.Equal(t, time.Minute+3*time.Millisecond, res.RetryAfter)
}

// TestAcquireRecountsOverRateValue: a Redisson availablePermits stores an
// uncapped sum after release and expiry (2 x rate here); our acquisition
// recounts instead of granting it.
func TestAcquireRecountsOverRateValue(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 5, Interval: time.Minute})
	ok, err := l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, rdb.Set(ctx, l.Keys().Value, 10, 0).Err())

	ok, err = l.TryAcquire(ctx, 4)
	require.NoError(t, err)
	require.False(t, ok, "only 5 - 2 = 3 are left in the window")
	require.Equal(t, "3", rdb.Get(ctx, l.Keys().Value).Val())

	require.NoError(t, rdb.Set(ctx, l.Keys().Value, 10, 0).Err())
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
}
