package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
)

func interceptors(l *grpclimit.Interceptor) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(l.Unary()), grpc.ChainStreamInterceptor(l.Stream())}
}

// Rate 3 per minute, keyed by peer: three calls pass, the next two fail
// with ResourceExhausted carrying RetryInfo (the hint) and QuotaFailure
// (the limiter), and the service sees three calls.
func TestUnaryRefusesWithRetryInfo(t *testing.T) {
	p := prefix(t)
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 3, Interval: time.Minute}, grpclimit.WithPrefix(p))
	require.NoError(t, err)
	h := &health{}
	c := startServer(t, h, interceptors(l)...)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "call %d", i)
	}
	for i := 0; i < 2; i++ {
		var trailer metadata.MD
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
		hint, ok := grpclimit.RetryAfter(err)
		require.True(t, ok)
		assert.True(t, hint > 55*time.Second && hint <= time.Minute+3*time.Millisecond, "hint %v", hint)
		var quota *errdetails.QuotaFailure
		for _, d := range st.Details() {
			if q, ok := d.(*errdetails.QuotaFailure); ok {
				quota = q
			}
		}
		require.NotNil(t, quota)
		require.Len(t, quota.Violations, 1)
		assert.Equal(t, p+"ip:127.0.0.1", quota.Violations[0].Subject)
		assert.Equal(t, "rate limit of 3 per 1m0s exceeded", quota.Violations[0].Description)
		assert.Equal(t, "default", quota.Violations[0].QuotaId)
		assert.Equal(t, "ratelimiter/permits", quota.Violations[0].QuotaMetric)
		assert.Equal(t, int64(3), quota.Violations[0].QuotaValue)
		assert.Equal(t, map[string]string{"key": "ip:127.0.0.1", "method": "/grpc.health.v1.Health/Check"}, quota.Violations[0].QuotaDimensions)
		// The pushback trailer is the hint in whole ms, rounded up.
		require.Len(t, trailer.Get(grpclimit.PushbackTrailer), 1, "%v", trailer)
		assert.Equal(t, strconv.FormatInt(int64((hint+time.Millisecond-1)/time.Millisecond), 10), trailer.Get(grpclimit.PushbackTrailer)[0])
	}
	assert.Equal(t, 3, h.count())
}

// 40 callers at once with one API key in metadata: exactly 15 pass, the
// rest are refused; another key and a call by method have their own
// budgets; a call without the key (no fallback) gets InvalidArgument.
func TestConcurrentCallersByMetadata(t *testing.T) {
	p := prefix(t)
	var hooked atomic.Value
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 15, Interval: time.Minute}, grpclimit.WithPrefix(p),
		grpclimit.WithKey(grpclimit.KeyByMetadata("X-API-Key")),
		grpclimit.WithErrorHook(func(_ context.Context, _ string, err error) { hooked.Store(err) }))
	require.NoError(t, err)
	h := &health{}
	c := startServer(t, h, interceptors(l)...)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "shared")
	var wg sync.WaitGroup
	codesSeen := make([]codes.Code, 40)
	for i := range codesSeen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
			codesSeen[i] = status.Code(err)
		}()
	}
	wg.Wait()
	count := map[codes.Code]int{}
	for _, c := range codesSeen {
		count[c]++
	}
	assert.Equal(t, map[codes.Code]int{codes.OK: 15, codes.ResourceExhausted: 25}, count)
	assert.Equal(t, 15, h.count())

	other := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "other")
	_, err = c.Check(other, &healthpb.HealthCheckRequest{})
	assert.NoError(t, err)
	_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.ErrorIs(t, hooked.Load().(error), grpclimit.ErrNoKey)
	left, err := l.Client().Limiter(p + "x-api-key:shared").AvailablePermits(context.Background())
	require.NoError(t, err)
	assert.Zero(t, left, "the granted calls took the whole budget")
}

// The client's deadline reaches the server: with WithWait(1h), a call
// whose deadline comes before the hint is refused at once with
// ResourceExhausted (not left to time out), and a call whose deadline
// leaves room waits for its permit and is served, its Decision showing
// the wait.
func TestDeadlineFromClient(t *testing.T) {
	p := prefix(t)
	var waited atomic.Int64
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: 300 * time.Millisecond},
		grpclimit.WithPrefix(p), grpclimit.WithKey(grpclimit.KeyByMethod), grpclimit.WithWait(time.Hour))
	require.NoError(t, err)
	h := &health{check: func(ctx context.Context) {
		if d, ok := grpclimit.FromContext(ctx); ok && d.Granted {
			waited.Store(int64(d.Waited))
		}
	}}
	c := startServer(t, h, interceptors(l)...)
	_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.NoError(t, l.Client().Limiter(l.Name("method:/grpc.health.v1.Health/Check")).SetRate(context.Background(),
		ratelimiter.Config{Rate: 1, Interval: time.Minute}, ratelimiter.KeepState()))
	_, err = c.Check(short, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.NoError(t, short.Err(), "refused before the client's deadline")

	require.NoError(t, l.Client().Limiter(l.Name("method:/grpc.health.v1.Health/Check")).SetRate(context.Background(),
		ratelimiter.Config{Rate: 1, Interval: 300 * time.Millisecond}))
	_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	roomy, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	_, err = c.Check(roomy, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Positive(t, waited.Load(), "the last call waited for its permit")
	assert.Equal(t, 3, h.count())
}

// Streams take their permits when they open: with a rate of 2, two
// Watch streams are served (their handlers see the Decision) and the
// third fails with ResourceExhausted.
func TestStreams(t *testing.T) {
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 2, Interval: time.Minute}, grpclimit.WithPrefix(prefix(t)))
	require.NoError(t, err)
	var decided atomic.Int64
	h := &health{check: func(ctx context.Context) {
		if d, ok := grpclimit.FromContext(ctx); ok && d.Granted && d.FullMethod == "/grpc.health.v1.Health/Watch" {
			decided.Add(1)
		}
	}}
	c := startServer(t, h, interceptors(l)...)
	for i := 0; i < 3; i++ {
		s, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = s.Recv()
		if i < 2 {
			require.NoError(t, err, "stream %d", i)
			_, err = s.Recv()
			assert.ErrorIs(t, err, io.EOF)
		} else {
			assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
			_, ok := grpclimit.RetryAfter(err)
			assert.True(t, ok)
		}
	}
	assert.Equal(t, int64(2), decided.Load())
	assert.Equal(t, 2, h.count())
}

// Redis gone, a port nothing listens on: fail open runs the handler for
// every call, fail closed fails them with Unavailable and runs none.
// Redis silent (a listener that accepts and never answers) until the
// client's deadline passes: the client gets DeadlineExceeded and no
// handler runs, in either mode. The hook sees every error.
func TestRedisFailure(t *testing.T) {
	silent := silentListener(t)
	for _, target := range []struct{ name, addr string }{{"dead port", deadAddr(t)}, {"silent", silent}} {
		for _, mode := range []grpclimit.FailureMode{grpclimit.FailOpen, grpclimit.FailClosed} {
			t.Run(target.name+"/"+map[grpclimit.FailureMode]string{0: "open", 1: "closed"}[mode], func(t *testing.T) {
				rdb := redis.NewClient(&redis.Options{Addr: target.addr, MaxRetries: -1, ReadTimeout: time.Minute,
					DialTimeout: time.Second, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
				defer rdb.Close()
				var hooked atomic.Int64
				l, err := grpclimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute}, grpclimit.WithFailureMode(mode),
					grpclimit.WithErrorHook(func(context.Context, string, error) { hooked.Add(1) }))
				require.NoError(t, err)
				served := make(chan struct{}, 2)
				h := &health{check: func(context.Context) { served <- struct{}{} }}
				c := startServer(t, h, interceptors(l)...)
				for i := 0; i < 2; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
					cancel()
					switch {
					case target.name == "silent":
						assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
					case mode == grpclimit.FailClosed:
						assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
					default:
						assert.NoError(t, err)
					}
				}
				want := 0
				if mode == grpclimit.FailOpen && target.name == "dead port" {
					want = 2
				}
				for i := 0; i < want; i++ {
					select {
					case <-served:
					case <-time.After(10 * time.Second):
						t.Fatal("fail open did not run the handler")
					}
				}
				assert.Equal(t, want, h.count())
				require.Eventually(t, func() bool { return hooked.Load() == 2 }, 10*time.Second, time.Millisecond)
			})
		}
	}
}

// Shadow mode: with a rate of 2 every one of 4 calls is served; the
// decision hook and the library's Decision hook see 2 grants and 2
// refusals, even with FailClosed and a wait configured.
func TestShadow(t *testing.T) {
	var mu sync.Mutex
	var seen []grpclimit.Decision
	var lib []ratelimiter.Decision
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 2, Interval: time.Minute}, grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithShadow(), grpclimit.WithFailClosed(), grpclimit.WithWait(time.Hour),
		grpclimit.WithDecisionHook(func(_ context.Context, d grpclimit.Decision) { mu.Lock(); seen = append(seen, d); mu.Unlock() }),
		grpclimit.WithClientOptions(ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
			mu.Lock()
			lib = append(lib, d)
			mu.Unlock()
		}})))
	require.NoError(t, err)
	h := &health{}
	c := startServer(t, h, interceptors(l)...)
	for i := 0; i < 4; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
	}
	assert.Equal(t, 4, h.count())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 4)
	require.Len(t, lib, 4)
	for i, d := range seen {
		assert.Equal(t, i < 2, d.Granted, "call %d", i)
		assert.True(t, d.Shadow)
		assert.Equal(t, i < 2, lib[i].Granted)
	}
}

// New refuses bad input before anything reaches Redis.
func TestNewRejectsBadInput(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer rdb.Close()
	good := ratelimiter.Config{Rate: 2, Interval: time.Second}
	for name, c := range map[string]struct {
		rdb  redis.UniversalClient
		cfg  ratelimiter.Config
		opts []grpclimit.Option
	}{
		"nil redis":     {nil, good, nil},
		"zero config":   {rdb, ratelimiter.Config{}, nil},
		"nil option":    {rdb, good, []grpclimit.Option{nil}},
		"nil key":       {rdb, good, []grpclimit.Option{grpclimit.WithKey(nil)}},
		"braces":        {rdb, good, []grpclimit.Option{grpclimit.WithPrefix("a{b}")}},
		"permits>rate":  {rdb, good, []grpclimit.Option{grpclimit.WithPermits(3)}},
		"negative wait": {rdb, good, []grpclimit.Option{grpclimit.WithWait(-time.Second)}},
		"bad mode":      {rdb, good, []grpclimit.Option{grpclimit.WithFailureMode(7)}},
	} {
		_, err := grpclimit.New(c.rdb, c.cfg, c.opts...)
		assert.ErrorIs(t, err, grpclimit.ErrInvalidOption, name)
		assert.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, name)
	}
	assert.False(t, errors.Is(nil, grpclimit.ErrInvalidOption))
}

// grpc-go's own retry policy waits the pushback trailer: with a 10 ms
// backoff and three attempts, a call refused on a 1-per-300 ms limiter
// would be refused three times within 30 ms; with the pushback it is
// retried after the hint and granted. The decision hook sees one refusal
// and one grant, the second no earlier than the first's hint after it.
func TestRetryPolicyWaitsPushback(t *testing.T) {
	p := prefix(t)
	var mu sync.Mutex
	var ds []grpclimit.Decision
	var at []time.Time
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: 300 * time.Millisecond}, grpclimit.WithPrefix(p),
		grpclimit.WithDecisionHook(func(_ context.Context, d grpclimit.Decision) {
			mu.Lock()
			defer mu.Unlock()
			ds, at = append(ds, d), append(at, time.Now())
		}))
	require.NoError(t, err)
	h := &health{}
	addr := listen(t, h, interceptors(l)...)
	cc := dial(t, addr, grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "grpc.health.v1.Health"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
			"backoffMultiplier": 1.0, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}`))
	c := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "the retry after the pushback is granted")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ds, 3, "grant, refusal, grant: %+v", ds)
	assert.True(t, ds[0].Granted && !ds[1].Granted && ds[2].Granted, "%+v", ds)
	assert.GreaterOrEqual(t, at[2].Sub(at[1]), ds[1].RetryAfter-time.Millisecond, "the retry waited the hint")
	assert.Equal(t, 2, h.count())
}

// WithSkip serves the calls it names without a decision: with a rate of
// 1, Check (skipped) is served every time with no hook, no permit and no
// Decision in its context, while Watch streams are limited; a nil skip is
// refused. SkipHealthAndReflection names the health and reflection
// services' methods only.
func TestSkip(t *testing.T) {
	var decisions atomic.Int64
	var withDecision atomic.Int64
	skip := func(_ context.Context, m string) bool { return m == "/grpc.health.v1.Health/Check" }
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithSkip(skip),
		grpclimit.WithDecisionHook(func(context.Context, grpclimit.Decision) { decisions.Add(1) }))
	require.NoError(t, err)
	h := &health{check: func(ctx context.Context) {
		if _, ok := grpclimit.FromContext(ctx); ok {
			withDecision.Add(1)
		}
	}}
	c := startServer(t, h, interceptors(l)...)
	for i := 0; i < 3; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "skipped call %d", i)
	}
	assert.Equal(t, int64(0), decisions.Load(), "skipped calls decided")
	assert.Equal(t, int64(0), withDecision.Load(), "a skipped call's context holds a Decision")
	for i := 0; i < 2; i++ {
		s, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = s.Recv()
		if i == 0 {
			require.NoError(t, err, "the first stream")
		} else {
			assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		}
	}
	assert.Equal(t, int64(2), decisions.Load(), "the streams, not skipped, were decided")

	_, err = grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, grpclimit.WithSkip(nil))
	assert.ErrorIs(t, err, grpclimit.ErrInvalidOption)

	for m, want := range map[string]bool{
		"/grpc.health.v1.Health/Check":                                   true,
		"/grpc.health.v1.Health/Watch":                                   true,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      true,
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": true,
		"/shop.Orders/Create":                                            false,
		"/grpc.health.v1.HealthX/Check":                                  false,
	} {
		assert.Equal(t, want, grpclimit.SkipHealthAndReflection(context.Background(), m), m)
	}
}
