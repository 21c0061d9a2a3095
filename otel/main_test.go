package ratelimiterotel_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	ratelimiterotel "github.com/goredisson/ratelimiter/otel"
)

// redisAddr is the real redis-server the tests share.
var redisAddr string

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }

func newRedis(t testing.TB) *redis.Client { return redistest.Client(t, redisAddr) }

// sdk is a real OTel SDK MeterProvider with a manual reader, and the
// metrics recorded on it.
type sdk struct {
	reader *sdkmetric.ManualReader
	m      *ratelimiterotel.Metrics
}

func newSDK(t testing.TB, opts ...ratelimiterotel.Option) sdk {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := ratelimiterotel.New(append([]ratelimiterotel.Option{ratelimiterotel.WithMeterProvider(mp)}, opts...)...)
	require.NoError(t, err)
	return sdk{reader, m}
}

// configured returns a limiter set to cfg on a new Client with the hooks.
func configured(t testing.TB, s sdk, name string, cfg ratelimiter.Config, opts ...ratelimiter.Option) *ratelimiter.Limiter {
	t.Helper()
	c := ratelimiter.NewClient(newRedis(t), append([]ratelimiter.Option{ratelimiter.WithHooks(s.m.Hooks())}, opts...)...)
	l := c.Limiter(name)
	_, err := l.TrySetRate(context.Background(), cfg)
	require.NoError(t, err)
	return l
}

// collect reads every metric of the scope.
func (s sdk) collect(t testing.TB) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, ratelimiterotel.ScopeName, sm.Scope.Name)
		require.Equal(t, ratelimiterotel.Version(), sm.Scope.Version)
		require.NotEmpty(t, sm.Scope.Version, "the test binary has build info")
		for _, m := range sm.Metrics {
			out[m.Name+" "+m.Unit] = m.Data
		}
	}
	return out
}

// sumOf returns the value of the counter's data point whose attributes
// are exactly want (key=value), or -1 when there is none.
func sumOf(t testing.TB, agg metricdata.Aggregation, want map[string]string) int64 {
	t.Helper()
	sum, ok := agg.(metricdata.Sum[int64])
	require.True(t, ok, "%T is not an int64 sum", agg)
	require.True(t, sum.IsMonotonic)
	for _, dp := range sum.DataPoints {
		if attrsOf(dp.Attributes.ToSlice()) == render(want) {
			return dp.Value
		}
	}
	return -1
}

func histCount(t testing.TB, agg metricdata.Aggregation, want map[string]string) (uint64, float64) {
	t.Helper()
	switch h := agg.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range h.DataPoints {
			if attrsOf(dp.Attributes.ToSlice()) == render(want) {
				return dp.Count, dp.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, dp := range h.DataPoints {
			if attrsOf(dp.Attributes.ToSlice()) == render(want) {
				return dp.Count, float64(dp.Sum)
			}
		}
	default:
		t.Fatalf("%T is not a histogram", agg)
	}
	return 0, 0
}
