package grpclimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// Four clients (each its own Redis connection, ratelimiter.Client and
// gRPC connection, warmed up first), five goroutines each, call a real
// gRPC server as fast as they can for 2.5 s through one limiter of 20
// per 1.05 s: the server never counts more than 20 calls in any 1 s
// window, and it gets at least two windows' worth. The 50 ms margin is
// that of httplimit.Transport's test: the spread of the delay from a
// grant's clock reading to the call's arrival.
func TestOutgoingHoldsLimitAtReceiver(t *testing.T) {
	const rate, interval, margin = 20, time.Second, 50 * time.Millisecond
	h := &health{}
	addr := listen(t, h)
	name := prefix(t) + "remote"
	var sent, limited atomic.Int64
	var wg, warm sync.WaitGroup
	stop := time.Now().Add(2500 * time.Millisecond)
	// Every sender is counted in warm before any can wait on it: a later
	// client's Add after an earlier client's goroutines reached Wait would
	// reuse the WaitGroup during a Wait.
	warm.Add(4 * 5)
	for range 4 {
		rdb := newRedis(t)
		out := &grpclimit.Outgoing{
			Limiter: ratelimiter.NewClient(rdb).Limiter(name),
			Config:  ratelimiter.Config{Rate: rate, Interval: interval + margin},
		}
		cc := dial(t, addr, grpc.WithUnaryInterceptor(out.Unary()))
		warmUp(t, cc)
		c := healthpb.NewHealthClient(cc)
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rdb.Ping(context.Background()) // a Redis connection of its own first
				warm.Done()
				warm.Wait()
				for time.Now().Before(stop) {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
					cancel()
					switch {
					case err == nil:
						sent.Add(1)
					case errors.Is(err, grpclimit.ErrLimited):
						limited.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, sent.Load(), int64(len(h.at)))
	assert.GreaterOrEqual(t, len(h.at), 2*rate)
	assert.LessOrEqual(t, redistest.MostInWindow(h.at, interval), rate, "arrivals in one sliding window")
	t.Logf("%d sent, %d limited; at most %d arrivals in a 1 s window", sent.Load(), limited.Load(), redistest.MostInWindow(h.at, interval))
}

// An outgoing call whose permits cannot come in time fails at once,
// before its deadline and without reaching the server, with an error
// that matches ErrLimited and carries ResourceExhausted; streams too.
// Redis gone: FailOpen sends, FailClosed fails with Unavailable.
func TestOutgoingFailsFastAndFailureModes(t *testing.T) {
	h := &health{}
	addr := listen(t, h)
	lim := ratelimiter.NewClient(newRedis(t)).Limiter(prefix(t) + "remote")
	require.NoError(t, lim.SetRate(context.Background(), ratelimiter.Config{Rate: 1, Interval: time.Minute}))
	require.NoError(t, lim.Acquire(context.Background(), 1))
	out := &grpclimit.Outgoing{Limiter: lim}
	c := healthpb.NewHealthClient(dial(t, addr, grpc.WithUnaryInterceptor(out.Unary()), grpc.WithStreamInterceptor(out.Stream())))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.ErrorIs(t, err, grpclimit.ErrLimited)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	_, err = c.Watch(ctx, &healthpb.HealthCheckRequest{})
	assert.ErrorIs(t, err, grpclimit.ErrLimited)
	assert.NoError(t, ctx.Err(), "failed before the deadline")
	assert.Zero(t, h.count())

	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer rdb.Close()
	dead := ratelimiter.NewClient(rdb).Limiter("remote")
	var hooked atomic.Int64
	onErr := func(context.Context, string, error) { hooked.Add(1) }
	open := &grpclimit.Outgoing{Limiter: dead, OnError: onErr}
	closed := &grpclimit.Outgoing{Limiter: dead, OnError: onErr, FailureMode: grpclimit.FailClosed}
	_, err = healthpb.NewHealthClient(dial(t, addr, grpc.WithUnaryInterceptor(open.Unary()))).Check(ctx, &healthpb.HealthCheckRequest{})
	assert.NoError(t, err)
	_, err = healthpb.NewHealthClient(dial(t, addr, grpc.WithUnaryInterceptor(closed.Unary()))).Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Equal(t, int64(2), hooked.Load())
	assert.Equal(t, 1, h.count(), "only the fail-open call arrived")
}
