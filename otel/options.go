package ratelimiterotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures New.
type Option func(*config)

type config struct {
	provider    metric.MeterProvider
	tracers     trace.TracerProvider
	mapName     func(string) string
	maxLimiters int
}

// DefaultMaxLimiters is the number of distinct limiter attribute values
// recorded before further limiters are recorded as OtherLimiters.
const DefaultMaxLimiters = 256

// OtherLimiters is the ratelimiter.name value of the limiters beyond the
// WithMaxLimiters bound.
const OtherLimiters = "_other"

// WithMeterProvider sets the MeterProvider the instruments come from; the
// default is otel.GetMeterProvider(), the global one. A nil provider
// makes New fail.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *config) { c.provider = p }
}

// WithTracerProvider sets the TracerProvider of the wait spans; the
// default is otel.GetTracerProvider(), the global one. A nil provider
// makes New fail.
func WithTracerProvider(p trace.TracerProvider) Option {
	return func(c *config) { c.tracers = p }
}

// WithLimiterName maps each limiter's name to the value of the
// ratelimiter.name attribute, for example to strip a tenant id and keep
// the number of values small; a mapping to "" leaves the attribute out.
// The default records the name as given to Client.Limiter. A nil mapper
// makes New fail.
func WithLimiterName(mapName func(string) string) Option {
	return func(c *config) { c.mapName = mapName }
}

// WithoutLimiterName leaves the ratelimiter.name attribute out: every
// limiter's decisions add up in the same series.
func WithoutLimiterName() Option {
	return WithLimiterName(func(string) string { return "" })
}

// WithMaxLimiters bounds the distinct ratelimiter.name values (after
// WithLimiterName) that New's hooks record: the first n seen keep their
// name, later ones are recorded as OtherLimiters. The default is
// DefaultMaxLimiters; n must be at least 1.
func WithMaxLimiters(n int) Option {
	return func(c *config) { c.maxLimiters = n }
}

func newConfig(opts []Option) config {
	c := config{provider: otel.GetMeterProvider(), tracers: otel.GetTracerProvider(), mapName: func(s string) string { return s }, maxLimiters: DefaultMaxLimiters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}
