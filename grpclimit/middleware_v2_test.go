package grpclimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
)

// *Interceptor is go-grpc-middleware v2's ratelimit.Limiter: inside that
// package's own interceptors, a 1-per-minute limiter serves one call and
// refuses the next with ResourceExhausted carrying our refusal's text,
// and the pushback trailer reaches the client.
func TestGoGRPCMiddlewareLimiter(t *testing.T) {
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, grpclimit.WithPrefix(prefix(t)))
	require.NoError(t, err)
	var _ ratelimit.Limiter = l
	h := &health{}
	c := startServer(t, h, grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(l)))
	ctx := context.Background()
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	var trailer metadata.MD
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	assert.True(t, strings.Contains(st.Message(), "rate limit exceeded; retry after"), st.Message())
	require.Len(t, trailer.Get(grpclimit.PushbackTrailer), 1, "%v", trailer)
	assert.Equal(t, 1, h.count())
}

// WithSkip holds inside go-grpc-middleware's interceptors too: Limit
// serves a skipped method without a decision, so a 1-per-minute limiter
// serves health checks every time.
func TestGoGRPCMiddlewareSkip(t *testing.T) {
	l, err := grpclimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithSkip(grpclimit.SkipHealthAndReflection))
	require.NoError(t, err)
	h := &health{}
	c := startServer(t, h, grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(l)))
	for i := 0; i < 3; i++ {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "health check %d", i)
	}
	assert.Equal(t, 3, h.count())
}
