package timerate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/timerate"
)

// xRate is the part of golang.org/x/time/rate's *Limiter method set that
// code commonly asks for; TimeRate must satisfy it as it is.
type xRate interface {
	Allow() bool
	AllowN(t time.Time, n int) bool
	Wait(ctx context.Context) error
	WaitN(ctx context.Context, n int) error
}

var _ xRate = (*timerate.Limiter)(nil)

// Through x/time/rate's method names: Allow takes one permit while the
// window has any; WaitN over the rate fails at once; Wait with a deadline
// the hint would pass fails at once; and a Redis error makes Allow false
// and is kept for Err.
func TestTimeRate(t *testing.T) {
	rdb := redistest.Client(t, redisAddr)
	l := ratelimiter.NewClient(rdb).Limiter(redistest.Name(t))
	_, err := l.TrySetRate(context.Background(), ratelimiter.Config{Rate: 2, Interval: time.Hour})
	require.NoError(t, err)
	var r xRate = timerate.New(l, 0)
	assert.True(t, r.Allow())
	assert.True(t, r.AllowN(time.Now(), 1))
	assert.False(t, r.Allow(), "the window holds the rate")
	assert.ErrorIs(t, r.WaitN(context.Background(), 3), ratelimiter.ErrPermitsExceedRate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.ErrorIs(t, r.Wait(ctx), context.DeadlineExceeded)
	assert.NoError(t, ctx.Err(), "an hour's hint passes the deadline: it failed before the deadline, on the hint")
	assert.NoError(t, timerate.New(l, 0).Err())

	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer dead.Close()
	tr := timerate.New(ratelimiter.NewClient(dead).Limiter("unreachable"), 200*time.Millisecond)
	assert.False(t, tr.Allow(), "an error is a refusal")
	require.Error(t, tr.Err())
	assert.False(t, errors.Is(tr.Err(), ratelimiter.ErrPermitsExceedRate))
}

var redisAddr string

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }

// Code written for x/time/rate takes a limiter shared through Redis.
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:timerate")
	defer limiter.Delete(ctx)
	_, err := limiter.TrySetRate(ctx, ratelimiter.Config{Rate: 2, Interval: time.Minute})
	if err != nil {
		panic(err)
	}

	// Any code that takes an interface of x/time/rate's methods.
	var r interface {
		Allow() bool
		Wait(ctx context.Context) error
	} = timerate.New(limiter, time.Second)
	fmt.Println(r.Allow(), r.Allow(), r.Allow())
	// Output: true true false
}
