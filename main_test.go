package ratelimiter_test

import (
	"context"
	"encoding/binary"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// redisAddr is the server every test in this package shares; each test
// works on limiter names of its own.
var redisAddr string

func TestMain(m *testing.M) {
	// Set once, before any Client's background goroutine can log:
	// quietRedisLog swaps where it writes (failover_test.go).
	redis.SetLogger(redisLog)
	os.Exit(redistest.Main(m, &redisAddr, nil))
}

func newRedis(t testing.TB) *redis.Client { return redistest.Client(t, redisAddr) }

// uniqueName gives each test its own limiter names on the shared server.
func uniqueName(t testing.TB) string { return redistest.Name(t) }

// fakeClock is a settable clock for WithClock; it only stamps records, so
// tests move time instead of sleeping.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Now().UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func (c *fakeClock) Millis() int64           { return c.ms.Load() }

// option stamps with the fake clock: the Client's, not the server's.
func (c *fakeClock) option() ratelimiter.Option {
	return func(cl *ratelimiter.Client) {
		ratelimiter.WithClock(c.Now)(cl)
		ratelimiter.WithServerClock(false)(cl)
	}
}

// setup returns a configured limiter on a fake clock.
func setup(t *testing.T, cfg ratelimiter.Config, opts ...ratelimiter.Option) (*ratelimiter.Limiter, *redis.Client, *fakeClock) {
	t.Helper()
	rdb := newRedis(t)
	clock := newFakeClock()
	c := ratelimiter.NewClient(rdb, append([]ratelimiter.Option{clock.option()}, opts...)...)
	l := c.Limiter(uniqueName(t))
	ok, err := l.TrySetRate(context.Background(), cfg)
	require.NoError(t, err)
	require.True(t, ok)
	return l, rdb, clock
}

// valueKey and permitsKey name the keys that hold the state of cfg's mode.
func valueKey(l *ratelimiter.Limiter, m ratelimiter.Mode) string {
	if m == ratelimiter.PerClient {
		return l.Keys().ClientValue
	}
	return l.Keys().Value
}

func permitsKey(l *ratelimiter.Limiter, m ratelimiter.Mode) string {
	if m == ratelimiter.PerClient {
		return l.Keys().ClientPermits
	}
	return l.Keys().Permits
}

// snapshot dumps every key of the limiter, to prove a call changed nothing.
func snapshot(t *testing.T, rdb *redis.Client, l *ratelimiter.Limiter) map[string]string {
	t.Helper()
	k := l.Keys()
	out := map[string]string{}
	for _, key := range []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits} {
		d, err := rdb.Dump(context.Background(), key).Result()
		if err == redis.Nil {
			continue
		}
		require.NoError(t, err)
		out[key] = d
	}
	return out
}

// recordPermits sums the permits that the records of a permits key hold.
func recordPermits(t testing.TB, rdb *redis.Client, key string) int64 {
	t.Helper()
	var sum int64
	for _, m := range rdb.ZRange(context.Background(), key, 0, -1).Val() {
		require.GreaterOrEqual(t, len(m), 4)
		sum += int64(binary.LittleEndian.Uint32([]byte(m[len(m)-4:])))
	}
	return sum
}

// grantTimes runs goroutines that call try (given their number) until end,
// a millisecond apart, and returns the times of the grants in epoch ms,
// sorted, and the calls that failed.
func grantTimes(goroutines int, end time.Time, try func(g int) (bool, error)) ([]int64, int) {
	var mu sync.Mutex
	var times []int64
	errs := 0
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ok, err := try(g)
				mu.Lock()
				if err != nil {
					errs++
				} else if ok {
					times = append(times, time.Now().UnixMilli())
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times, errs
}
