package ratelimiter_test

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// stallBound is the contract of issue 22's second item: a blocking call
// returns by its own timeout or its context's deadline plus 50 ms,
// whatever Redis does. The library gives an unanswered script call 25 ms
// past the timeout (timeoutGrace); the other 25 ms cover scheduling. A
// 100 ms timer on this 2-core machine, shared with other test runs (load
// 1.2), fired at most 4 ms late in 200 tries (p99 2.6 ms), so the test
// asserts the contract itself, with no margin beyond it.
const stallBound = 50 * time.Millisecond

// blackhole listens on loopback and accepts connections that are never
// answered; it returns the address.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// stalledServer starts a redis-server of its own, configures a limiter on
// it through rdb (so that rdb's pool holds a connection), and returns the
// server, rdb and the limiter's name.
func stalledServer(t *testing.T, opts *redis.Options) (*redistest.Server, *redis.Client, string) {
	t.Helper()
	redistest.Need(t)
	srv, err := redistest.StartWrapped(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	opts.Addr = srv.Addr()
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	name := uniqueName(t)
	_, err = ratelimiter.NewClient(rdb).Limiter(name).TrySetRate(context.Background(), ratelimiter.Config{Rate: 100, Interval: time.Second})
	require.NoError(t, err)
	return srv, rdb, name
}

// TestBlockingCallsReturnDuringStalls: TryAcquireTimeout(Background, 1,
// 100 ms) and Acquire under a 100 ms context deadline, with combining on
// and off, each on a fresh Client (its first call also checks the user's
// permissions), return within stallBound of their end against a server
// that accepts and never answers, a SIGSTOPped redis-server, a server
// under CLIENT PAUSE, and a dial that takes 2 s. Every redis.Client has
// go-redis's default options (but the slow Dialer). Before issue 22, the
// first two took 3.0 s and 6.0 s.
func TestBlockingCallsReturnDuringStalls(t *testing.T) {
	const timeout = 100 * time.Millisecond
	cases := map[string]func(t *testing.T) (rdb *redis.Client, name string, resume func()){
		"blackhole": func(t *testing.T) (*redis.Client, string, func()) {
			rdb := redis.NewClient(&redis.Options{Addr: blackhole(t)})
			t.Cleanup(func() { rdb.Close() })
			return rdb, uniqueName(t), func() {}
		},
		"SIGSTOP": func(t *testing.T) (*redis.Client, string, func()) {
			srv, rdb, name := stalledServer(t, &redis.Options{})
			require.NoError(t, syscall.Kill(srv.Pid(), syscall.SIGSTOP))
			resume := func() { _ = syscall.Kill(srv.Pid(), syscall.SIGCONT) }
			t.Cleanup(resume)
			return rdb, name, resume
		},
		"CLIENT PAUSE": func(t *testing.T) (*redis.Client, string, func()) {
			srv, rdb, name := stalledServer(t, &redis.Options{})
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			t.Cleanup(func() { admin.Close() })
			// Paused clients include this one: the pause just ends.
			require.NoError(t, admin.Do(context.Background(), "CLIENT", "PAUSE", 1500, "ALL").Err())
			return rdb, name, func() {}
		},
		"slow dial": func(t *testing.T) (*redis.Client, string, func()) {
			srv, _, name := stalledServer(t, &redis.Options{})
			// A client that has no connection yet: its first call dials.
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				time.Sleep(2 * time.Second)
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}})
			t.Cleanup(func() { rdb.Close() })
			return rdb, name, func() {}
		},
	}
	for stall, setup := range cases {
		t.Run(stall, func(t *testing.T) {
			rdb, name, resume := setup(t)
			defer resume()
			for _, batch := range []int{0, 1} {
				c := ratelimiter.NewClient(rdb, ratelimiter.WithMaxBatch(batch))
				l := c.Limiter(name)
				start := time.Now()
				ok, err := l.TryAcquireTimeout(context.Background(), 1, timeout)
				took := time.Since(start)
				t.Logf("batch %d TryAcquireTimeout(Background, 1, %v): %v, %v, %v", batch, timeout, took, ok, err)
				require.False(t, ok)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.LessOrEqual(t, took, timeout+stallBound, "TryAcquireTimeout, batch %d", batch)

				c = ratelimiter.NewClient(rdb, ratelimiter.WithMaxBatch(batch))
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start = time.Now()
				err = c.Limiter(name).Acquire(ctx, 1)
				took = time.Since(start)
				cancel()
				t.Logf("batch %d Acquire(100 ms deadline): %v, %v", batch, took, err)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.LessOrEqual(t, took, timeout+stallBound, "Acquire, batch %d", batch)
			}
		})
	}
}
