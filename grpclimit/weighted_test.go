package grpclimit_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
)

// tokens is a Rule.Cost: the health request's Service field read as the
// tokens the call asks for.
func tokens(_ context.Context, _ string, msg any) int64 {
	req, ok := msg.(*healthpb.HealthCheckRequest)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(req.GetService(), 10, 64)
	return n
}

// TestRuleCost, end to end over a real gRPC server and client on
// loopback: 3 calls and 1,000 tokens per minute. Each unary call takes 1
// from the calls rule and its tokens from the tokens rule, at once or not
// at all; the handler gives back what it did not use
// (Interceptor.Release); a refusal names the tokens rule; a stream's
// opening (no message) takes no tokens; a cost above the rule's rate is
// refused and reported.
func TestRuleCost(t *testing.T) {
	p := prefix(t)
	var mu sync.Mutex
	var hooked []error
	seen := &collect{}
	var l *grpclimit.Interceptor
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(p),
		grpclimit.WithKey(grpclimit.KeyByMetadata("x-key")),
		grpclimit.WithRules(
			grpclimit.Rule{Name: "calls", Config: ratelimiter.Config{Rate: 3, Interval: time.Minute}},
			grpclimit.Rule{Name: "tokens", Config: ratelimiter.Config{Rate: 1000, Interval: time.Minute}, Cost: tokens}),
		grpclimit.WithDecisionHook(seen.hook),
		grpclimit.WithErrorHook(func(_ context.Context, _ string, err error) { mu.Lock(); hooked = append(hooked, err); mu.Unlock() }))
	require.NoError(t, err)
	h := &health{}
	var releaseErr error
	h.check = func(ctx context.Context) {
		// The handler used 300 of the 750 tokens it reserved.
		d, ok := grpclimit.FromContext(ctx)
		if ok && d.Rule != "" {
			mu.Lock()
			defer mu.Unlock()
			releaseErr = l.Release(ctx, d.Key, 0, 450)
		}
	}
	c := startServer(t, h, interceptors(l)...)
	names := l.Names("x-key:a")

	_, err = c.Check(keyed("a"), &healthpb.HealthCheckRequest{Service: "750"})
	require.NoError(t, err)
	mu.Lock()
	require.NoError(t, releaseErr)
	h.check = nil
	mu.Unlock()
	assert.Equal(t, int64(2), left(t, l, names[0]))
	assert.Equal(t, int64(700), left(t, l, names[1]), "450 unused tokens given back")
	ds := seen.all()
	require.Len(t, ds, 1)
	assert.Equal(t, "tokens", ds[0].Rule, "tokens admit no second such call")
	assert.True(t, ds[0].Granted)

	_, err = c.Check(keyed("a"), &healthpb.HealthCheckRequest{Service: "800"})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Equal(t, names[1], quota(t, err).Subject, "the tokens rule refuses")
	hint, ok := grpclimit.RetryAfter(err)
	require.True(t, ok)
	assert.True(t, hint > 55*time.Second && hint <= time.Minute+3*time.Millisecond, "hint %v", hint)
	assert.Equal(t, int64(2), left(t, l, names[0]), "the refusal took no call")

	// A stream opens with no message: 1 call, no tokens.
	s, err := c.Watch(keyed("a"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = s.Recv()
	require.NoError(t, err)
	assert.Equal(t, int64(1), left(t, l, names[0]))
	assert.Equal(t, int64(700), left(t, l, names[1]))

	_, err = c.Check(keyed("a"), &healthpb.HealthCheckRequest{Service: "1001"})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	mu.Lock()
	require.Len(t, hooked, 1)
	require.ErrorIs(t, hooked[0], ratelimiter.ErrPermitsExceedRate)
	mu.Unlock()

	_, err = c.Check(keyed("a"), &healthpb.HealthCheckRequest{Service: "700"})
	require.NoError(t, err)
	_, err = c.Check(keyed("a"), &healthpb.HealthCheckRequest{Service: "0"})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "the calls rule is spent")
	assert.Equal(t, names[0], quota(t, err).Subject)
	assert.Equal(t, int64(0), left(t, l, names[1]))
	assert.Equal(t, 3, h.count())

	plain, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute})
	require.NoError(t, err)
	require.ErrorIs(t, plain.Release(context.Background(), "k", 1), grpclimit.ErrInvalidOption)
}

// TestRuleCostConcurrent: concurrent unary calls of varied token costs
// never take more than either rule's rate, and each rule's limiter holds
// exactly what the granted calls took.
func TestRuleCostConcurrent(t *testing.T) {
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithKey(grpclimit.KeyByMetadata("x-key")),
		grpclimit.WithRules(
			grpclimit.Rule{Name: "calls", Config: ratelimiter.Config{Rate: 30, Interval: time.Hour}},
			grpclimit.Rule{Name: "tokens", Config: ratelimiter.Config{Rate: 1000, Interval: time.Hour}, Cost: tokens}))
	require.NoError(t, err)
	c := startServer(t, &health{}, grpc.UnaryInterceptor(l.Unary()))
	var mu sync.Mutex
	var calls, toks int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				n := int64(20 + 13*((g*10+i)%7))
				_, err := c.Check(keyed("k"), &healthpb.HealthCheckRequest{Service: strconv.FormatInt(n, 10)})
				if err == nil {
					mu.Lock()
					calls, toks = calls+1, toks+n
					mu.Unlock()
				} else if status.Code(err) != codes.ResourceExhausted {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	names := l.Names("x-key:k")
	require.LessOrEqual(t, calls, int64(30))
	require.LessOrEqual(t, toks, int64(1000))
	require.Positive(t, calls)
	require.Equal(t, 30-calls, left(t, l, names[0]))
	require.Equal(t, 1000-toks, left(t, l, names[1]))
}

// With WithPerMessage, Rule.Cost reads each message a stream receives: a
// rule of payload bytes (10 per minute) beside a rule of messages lets
// two 4-byte messages through and ends the stream on the third.
func TestRuleCostPerMessage(t *testing.T) {
	bytes := func(_ context.Context, _ string, msg any) int64 {
		if m, ok := msg.(*testpb.StreamingOutputCallRequest); ok {
			return int64(len(m.GetPayload().GetBody()))
		}
		return 0 // the stream's opening: no bytes yet
	}
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{}, grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithKey(grpclimit.KeyByMetadata("x-key")), grpclimit.WithPerMessage(),
		grpclimit.WithRules(
			grpclimit.Rule{Name: "messages", Config: ratelimiter.Config{Rate: 100, Interval: time.Minute}},
			grpclimit.Rule{Name: "bytes", Config: ratelimiter.Config{Rate: 10, Interval: time.Minute}, Cost: bytes}))
	require.NoError(t, err)
	e := &echo{got: make(chan int, 1)}
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(l.Stream()))
	testpb.RegisterTestServiceServer(srv, e)
	c := testpb.NewTestServiceClient(dial(t, serveOn(t, srv)))
	ctx, cancel := context.WithTimeout(keyed("s"), 10*time.Second)
	defer cancel()
	s, err := c.FullDuplexCall(ctx)
	require.NoError(t, err)
	answered := 0
	for i := 0; i < 4; i++ {
		if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("abcd")}}); err != nil {
			break
		}
		if _, err = s.Recv(); err != nil {
			assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
			break
		}
		answered++
	}
	assert.Equal(t, 2, answered)
	assert.Equal(t, 2, <-e.got, "the handler got two messages, then the refusal")
	names := l.Names("x-key:s")
	assert.Equal(t, int64(98), left(t, l, names[0]), "the refused message took no message permit")
	assert.Equal(t, int64(2), left(t, l, names[1]))
}
