package ratelimiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// decisions collects what the Decision hook reports.
type decisions struct {
	mu  sync.Mutex
	all []ratelimiter.Decision
}

func (d *decisions) hooks() ratelimiter.Option {
	return ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(x ratelimiter.Decision) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.all = append(d.all, x)
	}})
}

func (d *decisions) list() []ratelimiter.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ratelimiter.Decision(nil), d.all...)
}

func TestHooksReportDecisions(t *testing.T) {
	ctx := context.Background()
	var seen decisions
	l, _, _ := setup(t, ratelimiter.Config{Rate: 2, Interval: time.Hour}, seen.hooks())

	ok, err := l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = l.TryAcquireTimeout(ctx, 1, time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = l.Allow(ctx, 3)
	require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate)

	got := seen.list()
	require.Len(t, got, 3)
	require.Equal(t, l.Name(), got[0].Limiter)
	require.Equal(t, ratelimiter.OpAllow, got[0].Op)
	require.True(t, got[0].Granted)
	require.Equal(t, int64(2), got[0].Permits)
	require.Equal(t, 1, got[0].Batch)
	require.Positive(t, got[0].RoundTrip)

	require.Equal(t, ratelimiter.OpTryAcquireTimeout, got[1].Op)
	require.True(t, !got[1].Granted && got[1].Err == nil, "refused")
	require.Greater(t, got[1].RetryAfter, 59*time.Minute, "the hint is the hour the first record holds")

	require.Equal(t, "exceeds_rate", ratelimiter.ErrorKind(got[2].Err))
	require.Error(t, got[2].Err)
}

func TestErrorKind(t *testing.T) {
	for err, want := range map[error]string{
		nil:                              "",
		context.Canceled:                 "canceled",
		context.DeadlineExceeded:         "deadline",
		ratelimiter.ErrNotInitialized:    "not_initialized",
		ratelimiter.ErrPermitsExceedRate: "exceeds_rate",
		ratelimiter.ErrCrossSlot:         "invalid_argument",
		ratelimiter.ErrCorruptState:      "corrupt_state",
		ratelimiter.ErrReplicaAck:        "replica_ack",
	} {
		require.Equal(t, want, ratelimiter.ErrorKind(err), "%v", err)
	}
	require.Equal(t, "redis", ratelimiter.ErrorKind(errors.New("READONLY You can't write against a read only replica.")))
	require.Equal(t, "acquire", ratelimiter.OpAcquire.String())
	require.Equal(t, "Op(9)", ratelimiter.Op(9).String())
}

// TestErrorsNameTheLimiter: every error of a limiter's call names it, and
// errors.Is still finds the sentinel errors through it.
func TestErrorsNameTheLimiter(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	l := ratelimiter.NewClient(rdb).Limiter(name)
	for what, err := range map[string]error{
		"acquire":   errOf(l.TryAcquire(ctx, 1)),
		"available": errOf(l.AvailablePermits(ctx)),
		"release":   l.Release(ctx, 1),
		"argument":  errOf(l.TryAcquire(ctx, 0)),
	} {
		var le *ratelimiter.LimiterError
		require.ErrorAs(t, err, &le, what)
		require.Equal(t, name, le.Limiter, what)
		require.Contains(t, err.Error(), `ratelimiter "`+name+`": `, what)
		if what == "argument" {
			require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
		} else {
			require.ErrorIs(t, err, ratelimiter.ErrNotInitialized, what)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// The Waiting hook counts blocking calls in progress by limiter: two
// callers blocked on a spent limiter count 2 until their contexts end,
// then 0; a try (TryAcquire) never counts.
func TestWaitingHook(t *testing.T) {
	var mu sync.Mutex
	waiting := map[string]int{}
	hooks := ratelimiter.WithHooks(ratelimiter.Hooks{Waiting: func(name string, delta int) {
		mu.Lock()
		defer mu.Unlock()
		waiting[name] += delta
	}})
	l, _, _ := setup(t, ratelimiter.Config{Rate: 1, Interval: time.Hour}, hooks)
	count := func() int { mu.Lock(); defer mu.Unlock(); return waiting[l.Name()] }
	ok, err := l.TryAcquire(context.Background(), 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 0, count())

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.Acquire(ctx, 1)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Acquire: %v, want canceled", err)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); count() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, 2, count(), "two callers blocked")
	cancel()
	wg.Wait()
	require.Equal(t, 0, count(), "none after they returned")
}

// DecisionContext gets the caller's context (a value put in it comes
// back) with the same Decision as Decision.
func TestDecisionContextHook(t *testing.T) {
	type key struct{}
	var mu sync.Mutex
	var got []any
	var plain []ratelimiter.Decision
	hooks := ratelimiter.WithHooks(ratelimiter.Hooks{
		Decision: func(d ratelimiter.Decision) { mu.Lock(); plain = append(plain, d); mu.Unlock() },
		DecisionContext: func(ctx context.Context, d ratelimiter.Decision) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ctx.Value(key{}))
			require.Equal(t, plain[len(plain)-1], d)
		}})
	l, _, _ := setup(t, ratelimiter.Config{Rate: 1, Interval: time.Hour}, hooks)
	ctx := context.WithValue(context.Background(), key{}, "caller")
	_, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	ok, err := l.TryAcquireTimeout(ctx, 1, 0)
	require.NoError(t, err)
	require.False(t, ok)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []any{"caller", "caller"}, got)
}
