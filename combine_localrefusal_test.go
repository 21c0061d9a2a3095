package ratelimiter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// After a refusal, the same ask is refused without a Redis call until the
// hint passes; this Client's Release and SetRate end that at once; other
// asks, and WithLocalRefusals(false), go to Redis.
func TestLocalRefusals(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, ownServer(t).Addr()) // counts the server's script calls
	var local atomic.Int64
	hooks := ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
		if d.Local {
			local.Add(1)
		}
	}})
	c := ratelimiter.NewClient(rdb, hooks)
	l := c.Limiter(uniqueName(t))
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 3, Interval: time.Minute})
	require.NoError(t, err)
	ok, err := l.TryAcquire(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)
	first, err := l.Allow(ctx, 1)
	require.NoError(t, err)
	require.False(t, first.Granted)

	before := redistest.ScriptCalls(t, rdb)
	for i := 0; i < 50; i++ {
		res, err := l.Allow(ctx, 1)
		require.NoError(t, err)
		require.False(t, res.Granted)
		require.LessOrEqual(t, res.RetryAfter, first.RetryAfter)
		require.Equal(t, first.Limit, res.Limit)
	}
	require.Equal(t, int64(0), redistest.ScriptCalls(t, rdb)-before, "local refusals make no script call")
	require.Equal(t, int64(50), local.Load())

	ok, err = l.TryAcquire(ctx, 2) // another ask: to Redis
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, int64(1), redistest.ScriptCalls(t, rdb)-before)

	require.NoError(t, l.Release(ctx, 1)) // ends the local refusals
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok, "granted by Redis after this Client's release")

	_, err = l.Allow(ctx, 1) // refused again, locally from now on
	require.NoError(t, err)
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Minute}))
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok, "granted by Redis after this Client raised the rate")

	off := ratelimiter.NewClient(rdb, ratelimiter.WithLocalRefusals(false)).Limiter(l.Name())
	ok, err = off.TryAcquire(ctx, 10)
	require.NoError(t, err)
	require.False(t, ok)
	before = redistest.ScriptCalls(t, rdb)
	for i := 0; i < 5; i++ {
		_, err = off.TryAcquire(ctx, 10)
		require.NoError(t, err)
	}
	require.Equal(t, int64(5), redistest.ScriptCalls(t, rdb)-before, "WithLocalRefusals(false) asks Redis every time")
}

// When the hint passes, the next call asks Redis again and is granted
// once the records have expired.
func TestLocalRefusalEndsWithHint(t *testing.T) {
	ctx := context.Background()
	l := ratelimiter.NewClient(newRedis(t)).Limiter(uniqueName(t))
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 2, Interval: 200 * time.Millisecond})
	require.NoError(t, err)
	ok, err := l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	res, err := l.Allow(ctx, 2)
	require.NoError(t, err)
	require.False(t, res.Granted)
	time.Sleep(res.RetryAfter)
	ok, err = l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok, "the hint passed: Redis grants")
}

// 64 Clients, one caller each, over-asking one limiter for 2 s: at most
// 0.05 script calls per refused decision, and no window of the records
// holds more than the rate.
func TestLocalRefusalsFleet(t *testing.T) {
	redistest.SkipIfShort(t, "a 2 s fleet run")
	ctx := context.Background()
	srv := ownServer(t) // counts the server's script calls
	rdb := redistest.Client(t, srv.Addr())
	const rate, interval, clients = 10, 500 * time.Millisecond, 64
	name := uniqueName(t)
	setup := ratelimiter.NewClient(rdb).Limiter(name)
	_, err := setup.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
	require.NoError(t, err)
	stop := make(chan struct{})
	records := sampleRecords(t, redistest.Client(t, srv.Addr()), setup.Keys().Permits, interval, stop)
	before := redistest.ScriptCalls(t, rdb)
	stalls := watchStalls()
	var refused, granted atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(2 * time.Second)
	for i := 0; i < clients; i++ {
		l := ratelimiter.NewClient(redistest.Client(t, srv.Addr())).Limiter(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ok, err := l.TryAcquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					granted.Add(1)
				} else {
					refused.Add(1)
				}
				time.Sleep(time.Millisecond) // a caller that asks a thousand times a second
			}
		}()
	}
	wg.Wait()
	close(stop)
	calls := redistest.ScriptCalls(t, rdb) - before
	perRefusal := float64(calls-granted.Load()) / float64(refused.Load())
	t.Logf("LOCAL REFUSALS %d Clients: %d granted, %d refused, %d script calls: %.4f per refused decision",
		clients, granted.Load(), refused.Load(), calls, perRefusal)
	require.LessOrEqual(t, perRefusal, 0.05)
	checkWindows(t, <-records, rate, interval-min(stampWindowSlack(t, stalls()), interval*3/4))
}

// A local refusal ends at most one interval after its call was sent:
// after a writer stamping a minute ahead, the operator deletes and
// re-creates the limiter; a Client that was refused with a minute's hint
// asks Redis again an interval later and is granted (it kept refusing
// locally for the whole minute before). Both reply forms: TryAcquire's
// (the single form, whose hint the script caps at the interval and 3 ms)
// and Allow's (the whole hint, the interval beside it).
func TestLocalRefusalAtMostAnInterval(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "try", true: "allow"}[allow], func(t *testing.T) {
			ctx := context.Background()
			rdb := newRedis(t)
			name := uniqueName(t)
			cfg := ratelimiter.Config{Rate: 1, Interval: time.Second}
			ahead := ratelimiter.NewClient(rdb, ratelimiter.WithServerClock(false),
				ratelimiter.WithClock(func() time.Time { return time.Now().Add(time.Minute) })).Limiter(name)
			_, err := ahead.TrySetRate(ctx, cfg)
			require.NoError(t, err)
			ok, err := ahead.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)

			var last ratelimiter.Decision
			hooks := ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) { last = d }})
			clock := newFakeClock() // dates this Client's local refusals only
			l := ratelimiter.NewClient(rdb, hooks, ratelimiter.WithClock(clock.Now)).Limiter(name)
			call := func() bool {
				if allow {
					res, err := l.Allow(ctx, 1)
					require.NoError(t, err)
					return res.Granted
				}
				ok, err := l.TryAcquire(ctx, 1)
				require.NoError(t, err)
				return ok
			}
			require.False(t, call())
			require.False(t, last.Local)
			if allow {
				require.Greater(t, last.RetryAfter, 30*time.Second, "the record a minute ahead")
			} else {
				require.Equal(t, cfg.Interval+3*time.Millisecond, last.RetryAfter, "the single form's hint, capped")
			}
			require.False(t, call())
			require.True(t, last.Local, "refused locally within the interval")

			operator := ratelimiter.NewClient(rdb).Limiter(name)
			_, err = operator.Delete(ctx)
			require.NoError(t, err)
			_, err = operator.TrySetRate(ctx, cfg)
			require.NoError(t, err)
			clock.Advance(cfg.Interval)
			require.True(t, call(), "an interval after the refusal, Redis is asked again")
		})
	}
}
