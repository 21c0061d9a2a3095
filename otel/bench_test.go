package ratelimiterotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/goredisson/ratelimiter"
)

// BenchmarkOTelHook is the cost of recording one decision with the real
// SDK (a manual reader), Redis left out: a grant, and a refusal of a
// blocking call (which records a wait too).
//
//	cd otel && go test -run '^$' -bench OTelHook -benchmem .
func BenchmarkOTelHook(b *testing.B) {
	for _, tc := range []struct {
		name string
		d    ratelimiter.Decision
	}{
		{"granted", ratelimiter.Decision{Limiter: "bench", Op: ratelimiter.OpAllow, Permits: 1, Granted: true,
			RoundTrip: 50 * time.Microsecond, Batch: 1}},
		{"refused-wait", ratelimiter.Decision{Limiter: "bench", Op: ratelimiter.OpTryAcquireTimeout, Permits: 1,
			RetryAfter: time.Second, Waited: time.Millisecond, RoundTrip: 50 * time.Microsecond, Batch: 4}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			hook := newSDK(b).m.Decision
			hook(tc.d)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hook(tc.d)
			}
		})
	}
}

// BenchmarkSDKCounterAdd is the SDK's own cost of one counter Add with a
// prepared set of three attributes, for comparison: a grant records four
// instruments.
func BenchmarkSDKCounterAdd(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	c, _ := mp.Meter("x").Int64Counter("c")
	opts := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("a", "b"), attribute.String("c", "d"), attribute.String("e", "f")))}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.Add(ctx, 1, opts...)
	}
}
