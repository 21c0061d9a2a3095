package ratelimiterotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	ratelimiterotel "github.com/goredisson/ratelimiter/otel"
)

// With the SDK's tracer: each decision is an event on the caller's span
// (outcome, permits, the hint of a refusal), and a blocking call that
// waited is a child span "ratelimiter.wait" as long as the wait.
func TestTraceEventsAndWaitSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	mp := sdkmetric.NewMeterProvider()
	m, err := ratelimiterotel.New(ratelimiterotel.WithMeterProvider(mp), ratelimiterotel.WithTracerProvider(tp))
	require.NoError(t, err)
	l := ratelimiter.NewClient(newRedis(t), ratelimiter.WithHooks(m.Hooks())).Limiter(redistest.Name(t))
	_, err = l.TrySetRate(context.Background(), ratelimiter.Config{Rate: 1, Interval: 300 * time.Millisecond})
	require.NoError(t, err)

	ctx, span := tp.Tracer("test").Start(context.Background(), "caller")
	ok, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = l.TryAcquireTimeout(ctx, 1, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	span.End()

	spans := exp.GetSpans()
	var caller, wait *tracetest.SpanStub
	for i := range spans {
		switch spans[i].Name {
		case "caller":
			caller = &spans[i]
		case "ratelimiter.wait":
			wait = &spans[i]
		}
	}
	require.NotNil(t, caller)
	require.Len(t, caller.Events, 3)
	outcomes := []string{}
	for _, e := range caller.Events {
		assert.Equal(t, "ratelimiter.decision", e.Name)
		for _, kv := range e.Attributes {
			if kv.Key == ratelimiterotel.AttrOutcome {
				outcomes = append(outcomes, kv.Value.AsString())
			}
		}
	}
	assert.Equal(t, []string{"granted", "refused", "granted"}, outcomes)
	require.NotNil(t, wait, "the wait is a span")
	assert.Equal(t, caller.SpanContext.SpanID(), wait.Parent.SpanID())
	assert.Positive(t, wait.EndTime.Sub(wait.StartTime))
}

// Without a recording span the hook does nothing and allocates nothing.
func TestTraceWithoutSpanAllocatesNothing(t *testing.T) {
	m, err := ratelimiterotel.New(ratelimiterotel.WithMeterProvider(sdkmetric.NewMeterProvider()))
	require.NoError(t, err)
	d := ratelimiter.Decision{Limiter: "x", Op: ratelimiter.OpAcquire, Permits: 1, Waited: time.Second}
	ctx := context.Background()
	assert.Zero(t, testing.AllocsPerRun(100, func() { m.Trace(ctx, d) }))
}
