package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// must stops an example on an error; real code handles it.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

// A service and a Java service share one limiter: the same name gives the
// same keys. Many goroutines may use one Client: their acquisitions of a
// limiter share script calls.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := ratelimiter.NewClient(rdb)

	limiter := client.Limiter("example:package")
	defer limiter.Delete(ctx)
	// Java: redisson.getRateLimiter("example:package").trySetRate(RateType.OVERALL, 10, Duration.ofSeconds(1))
	_, err := limiter.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second})
	must(err)

	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := limiter.TryAcquire(ctx, 1)
			must(err)
			if ok {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Println("granted", granted, "of 20")
	// Output: granted 10 of 20
}

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
	must(limiter.SetRate(ctx, ratelimiter.Config{Rate: 3, Interval: time.Minute}))

	for i := 0; i < 3; i++ {
		ok, err := limiter.TryAcquire(ctx, 1)
		must(err)
		fmt.Print(ok, " ")
	}
	ok, err := limiter.TryAcquire(ctx, 1)
	must(err)
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
	must(limiter.SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour}))

	res, err := limiter.Allow(ctx, 1)
	must(err)
	fmt.Println(res.Granted, res.Limit, res.Remaining)
	res, err = limiter.Allow(ctx, 1)
	must(err)
	fmt.Println(res.Granted, res.RetryAfter > 59*time.Minute)
	// Output:
	// true 1 0
	// false true
}

// Acquire waits for permits; with a context deadline that the wait cannot
// meet, it returns at once.
func ExampleLimiter_Acquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	limiter := ratelimiter.NewClient(rdb).Limiter("example:acquire")
	defer limiter.Delete(ctx)
	must(limiter.SetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour}))

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
	must(limiter.SetRate(ctx, ratelimiter.Config{Rate: 2, Interval: 100 * time.Millisecond}))

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
	must(limiter.SetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Minute}))
	_, err := limiter.TryAcquire(ctx, 4)
	must(err)

	// Raise the rate without forgetting the 4 permits already taken.
	ok, err := limiter.UpdateRate(ctx, ratelimiter.Config{Rate: 20, Interval: time.Minute}, ratelimiter.KeepState())
	must(err)
	n, err := limiter.AvailablePermits(ctx)
	must(err)
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

// A Go replica beside a Java service whose pool of 8 threads waits on the
// same limiter: told of those 8, the replica's blocked callers aim at the
// share of one waiter each instead of half of the permits for the Go side
// (docs/fairness.md). A wrong count fails every call, before Redis.
func ExampleWithForeignWaiters() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := ratelimiter.NewClient(rdb, ratelimiter.WithForeignWaiters(8))
	limiter := client.Limiter("example:foreign")
	defer limiter.Delete(ctx)
	_, err := limiter.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second})
	must(err)
	fmt.Println(limiter.Acquire(ctx, 1))

	bad := ratelimiter.NewClient(rdb, ratelimiter.WithForeignWaiters(-1))
	err = bad.Limiter("example:foreign").Acquire(ctx, 1)
	fmt.Println(errors.Is(err, ratelimiter.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}

// A Go fleet that must let a Java service joining late in within an
// interval and Redisson's tick: a probe window in every interval, at the
// cost of about one grant a window (docs/fairness.md). Every Client of
// the limiter needs the same setting. A value out of range fails every
// call, before Redis.
func ExampleWithProbeWindows() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := ratelimiter.NewClient(rdb, ratelimiter.WithProbeWindows(1))
	fmt.Println(client.Err())

	bad := ratelimiter.NewClient(rdb, ratelimiter.WithProbeWindows(0))
	fmt.Println(errors.Is(bad.Err(), ratelimiter.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}

// An LLM API's requests-per-minute and tokens-per-minute limits in one
// call: reserve 1 request and the 750 tokens a prompt may use, both or
// neither, then give back the tokens the response did not use.
func ExampleComposite_Weighted() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := ratelimiter.NewClient(rdb)
	rpm, tpm := client.Limiter("example:{llm}:rpm"), client.Limiter("example:{llm}:tpm")
	defer rpm.Delete(ctx)
	defer tpm.Delete(ctx)
	rpm.SetRate(ctx, ratelimiter.Config{Rate: 500, Interval: time.Minute})
	tpm.SetRate(ctx, ratelimiter.Config{Rate: 1000, Interval: time.Minute})
	llm := client.All("example:{llm}:rpm", "example:{llm}:tpm")

	res, err := llm.Weighted(1, 750).Allow(ctx, 1)
	must(err)
	fmt.Println(res.Granted, res.Parts[0].Remaining, res.Parts[1].Remaining)

	// The response used 300 tokens: give back 450, keep the request.
	must(llm.Weighted(0, 450).Release(ctx, 1))
	left, _ := tpm.AvailablePermits(ctx)
	fmt.Println(left)

	// 800 tokens do not fit: refused by the tokens part, nothing taken.
	res, err = llm.Weighted(1, 800).Allow(ctx, 1)
	must(err)
	fmt.Println(res.Granted, llm.Parts()[res.Part].Name(), res.Parts[0].Short, res.Parts[1].Short, res.RetryAfter > 0)
	// Output:
	// true 499 250
	// 700
	// false example:{llm}:tpm false true true
}

// Four replicas of a service share the limiter "api". While Redis is
// unreachable each decides alone at a quarter of the rate, and says so.
func ExampleWithOutageFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	client := ratelimiter.NewClient(rdb,
		ratelimiter.WithOutageFallback(ratelimiter.OutageFallback{Replicas: 4}),
		ratelimiter.WithHooks(ratelimiter.Hooks{Outage: func(e ratelimiter.OutageEvent) {
			if e.Down {
				fmt.Println("Redis unreachable, limiting locally:", e.Err)
			} else {
				fmt.Println("Redis back after", e.Lasted)
			}
		}}))
	defer client.Close(context.Background())
	res, err := client.Limiter("api").Allow(context.Background(), 1)
	if err == nil && res.Degraded {
		fmt.Println("decided locally:", res.Granted, "of", res.Limit, "per", res.Interval)
	}
}
