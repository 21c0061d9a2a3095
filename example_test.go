package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// Share a limiter with Java services: the same name, the same keys.
func ExampleNewClient() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()

	limiter := ratelimiter.NewClient(rdb).Limiter("example:new-client")
	defer limiter.Delete(ctx)
	// Like Java's limiter.trySetRate(RateType.OVERALL, 100, Duration.ofMinutes(1)).
	ok, err := limiter.TrySetRate(ctx, ratelimiter.Config{Rate: 100, Interval: time.Minute})
	fmt.Println(ok, err)
	// Output: true <nil>
}

func ExampleLimiter_TryAcquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:try-acquire")
	defer limiter.Delete(ctx)
	limiter.SetRate(ctx, ratelimiter.Config{Rate: 3, Interval: time.Minute})

	for i := 0; i < 3; i++ {
		ok, _ := limiter.TryAcquire(ctx, 1)
		fmt.Print(ok, " ")
	}
	ok, _ := limiter.TryAcquire(ctx, 1)
	fmt.Println(ok)
	// Output: true true true false
}

// Allow returns the wait hint for a refusal, for a Retry-After header.
func ExampleLimiter_Allow() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:allow")
	defer limiter.Delete(ctx)
	limiter.SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour})

	limiter.Allow(ctx, 1)
	res, err := limiter.Allow(ctx, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Granted, res.RetryAfter > 59*time.Minute)
	// Output: false true
}

// Acquire waits for permits; with a context deadline that the wait cannot
// meet, it returns at once.
func ExampleLimiter_Acquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:acquire")
	defer limiter.Delete(ctx)
	limiter.SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour})

	fmt.Println(limiter.Acquire(ctx, 1))
	ctx2, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := limiter.Acquire(ctx2, 1)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// <nil>
	// true
}

func ExampleLimiter_TryAcquireTimeout() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:try-acquire-timeout")
	defer limiter.Delete(ctx)
	limiter.SetRate(ctx, ratelimiter.Config{Rate: 2, Interval: 100 * time.Millisecond})

	ok, err := limiter.TryAcquireTimeout(ctx, 2, time.Second)
	fmt.Println(ok, err)
	// The next two permits come back 100 ms later: within the timeout.
	ok, err = limiter.TryAcquireTimeout(ctx, 2, time.Second)
	fmt.Println(ok, err)
	// Output:
	// true <nil>
	// true <nil>
}

func ExampleLimiter_UpdateRate() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:update-rate")
	defer limiter.Delete(ctx)
	limiter.SetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Minute})
	limiter.TryAcquire(ctx, 4)

	// Raise the rate without forgetting the 4 permits already taken.
	ok, _ := limiter.UpdateRate(ctx, ratelimiter.Config{Rate: 20, Interval: time.Minute}, ratelimiter.KeepState())
	n, _ := limiter.AvailablePermits(ctx)
	fmt.Println(ok, n)
	// Output: true 16
}

// A per-second and a per-hour limit in one call: permits come from both or
// from neither.
func ExampleClient_All() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := ratelimiter.NewClient(rdb)
	sec, hour := client.Limiter("example:{42}:sec"), client.Limiter("example:{42}:hour")
	defer sec.Delete(ctx)
	defer hour.Delete(ctx)
	sec.SetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second})
	hour.SetRate(ctx, ratelimiter.Config{Rate: 3, Interval: time.Hour})

	quota := client.All("example:{42}:sec", "example:{42}:hour")
	for i := 0; i < 4; i++ {
		ok, _ := quota.TryAcquire(ctx, 1)
		fmt.Print(ok, " ")
	}
	left, _ := sec.AvailablePermits(ctx)
	fmt.Println(left)
	// Output: true true true false 7
}
