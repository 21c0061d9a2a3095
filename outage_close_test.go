package ratelimiter

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Degraded mode (WithOutageFallback) against a go-redis client whose
// every dial is refused at once, as go-redis answers from its last dial
// error: no redis-server needed.

// refusedDial is the error of a dial to a port nothing listens on.
var refusedDial = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// refusingRedis returns a go-redis client whose dials fail at once.
func refusingRedis(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{
		Addr:          "127.0.0.1:1",
		MaxRetries:    -1,
		DialerRetries: 1,
		PoolSize:      1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, refusedDial
		},
	})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestOutageEndsWhenTheRedisClientIsClosed: a probe that finds the
// go-redis client closed ends the outage (no PING would ever end it).
func TestOutageEndsWhenTheRedisClientIsClosed(t *testing.T) {
	rdb := refusingRedis(t)
	o := newOutage(OutageFallback{Share: 1, Probe: 10 * time.Millisecond, Limiters: 10}, rdb, nil)
	o.enter(refusedDial)
	time.Sleep(50 * time.Millisecond) // a few refused PINGs
	require.True(t, o.down())
	require.NoError(t, rdb.Close())
	require.Eventually(t, func() bool { return !o.down() }, 2*time.Second, 5*time.Millisecond,
		"the outage outlived the go-redis client")
}

// TestBlockingCallAfterCloseInAnOutageReturns: a blocking call on a
// Client closed during an outage goes to Redis and returns its refusal
// at once, instead of calling again until its timeout (TryAcquireTimeout)
// or forever (Acquire without a deadline).
func TestBlockingCallAfterCloseInAnOutageReturns(t *testing.T) {
	c := NewClient(refusingRedis(t), WithOutageFallback(OutageFallback{Replicas: 1, Probe: 10 * time.Millisecond}))
	l := c.Limiter("after-close")
	c.out.learn(l.lane, 10, time.Second)
	c.out.enter(refusedDial)
	require.True(t, c.InOutage())
	require.NoError(t, c.Close(context.Background()))

	done := make(chan error, 2)
	go func() {
		_, err := l.TryAcquireTimeout(context.Background(), 1, 100*time.Millisecond)
		done <- err
	}()
	go func() { done <- l.Acquire(context.Background(), 1) }()
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			require.ErrorIs(t, err, syscall.ECONNREFUSED, "Redis's refusal, not a spin to the timeout")
		case <-time.After(2 * time.Second):
			t.Fatal("a blocking call on a Client closed in an outage did not return")
		}
	}
}

// TestDegradedOnlyWhenDecidedLocally: in an outage, a call on a limiter
// whose rate the Client has not seen goes to Redis and fails: its
// Decision is not Degraded. One whose rate is known is.
func TestDegradedOnlyWhenDecidedLocally(t *testing.T) {
	var mu sync.Mutex
	var last Decision
	c := NewClient(refusingRedis(t),
		WithOutageFallback(OutageFallback{Replicas: 1, Probe: time.Second}),
		WithHooks(Hooks{Decision: func(d Decision) {
			mu.Lock()
			last = d
			mu.Unlock()
		}}))
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	ctx := context.Background()
	c.out.enter(refusedDial)

	unknown := c.Limiter("unknown")
	for _, call := range []func() error{
		func() error { _, err := unknown.Allow(ctx, 1); return err },
		func() error { _, err := unknown.TryAcquire(ctx, 1); return err },
	} {
		require.Error(t, call(), "Redis refuses the dial")
		mu.Lock()
		d := last
		mu.Unlock()
		require.Error(t, d.Err)
		require.False(t, d.Degraded, "a call decided (failed) by Redis is not Degraded: %+v", d)
	}

	known := c.Limiter("known")
	c.out.learn(known.lane, 10, time.Second)
	res, err := known.Allow(ctx, 1)
	require.NoError(t, err)
	require.True(t, res.Granted && res.Degraded)
	mu.Lock()
	require.True(t, last.Degraded && last.Granted, "%+v", last)
	mu.Unlock()
}

// TestClosedRedisClientBeginsNoOutage: once the caller closed the go-redis
// client, acquisitions fail with its ErrClosed, as without the option.
func TestClosedRedisClientBeginsNoOutage(t *testing.T) {
	rdb := refusingRedis(t)
	c := NewClient(rdb, WithOutageFallback(OutageFallback{Replicas: 1, Probe: 10 * time.Millisecond}))
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	l := c.Limiter("closed")
	c.out.learn(l.lane, 10, time.Second)
	require.NoError(t, rdb.Close())
	res, err := l.Allow(context.Background(), 1)
	require.ErrorIs(t, err, redis.ErrClosed)
	require.False(t, res.Degraded)
	require.False(t, c.InOutage())
}
