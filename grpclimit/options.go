package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// Option configures an Interceptor.
type Option func(*Interceptor)

func (l *Interceptor) fail(format string, args ...any) {
	l.err = errors.Join(l.err, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// WithKey sets the key function; the default is KeyByPeer.
func WithKey(f KeyFunc) Option {
	return func(l *Interceptor) {
		if f == nil {
			l.fail("nil key function")
		}
		l.key = f
	}
}

// WithClientOptions passes options (client id, name mapper, member
// format, clock, hooks) to the ratelimiter.Client the Interceptor makes
// on rdb.
func WithClientOptions(opts ...ratelimiter.Option) Option {
	return func(l *Interceptor) {
		for _, o := range opts {
			if o == nil {
				l.fail("nil client option")
				continue
			}
			l.copts = append(l.copts, o)
		}
	}
}

// WithPrefix sets the text put before every key to name its limiter; the
// default is "grpc:". It must be at most 128 printable ASCII characters
// without '{' or '}', which would change Redis Cluster hash slots.
func WithPrefix(p string) Option {
	return func(l *Interceptor) {
		if !gate.SafeName(p, gate.MaxKeyLen) {
			l.fail("prefix %q must be at most %d printable ASCII characters without '{' or '}'", p, gate.MaxKeyLen)
		}
		l.prefix = p
	}
}

// WithPermits sets the permits each call takes (default 1); it must be
// from 1 to the Config's rate.
func WithPermits(n int64) Option {
	return func(l *Interceptor) { l.permits = n }
}

// WithWait makes a call that finds no permits wait up to max for them
// before it is refused; a wait that would pass the call's deadline (sent
// by the client) is refused at once. The default, 0, refuses at once.
func WithWait(max time.Duration) Option {
	return func(l *Interceptor) {
		if max < 0 {
			l.fail("negative wait %v", max)
		}
		l.wait = max
	}
}

// WithFailClosed makes the interceptors fail calls with codes.Unavailable
// when Redis fails, instead of serving them (FailOpen, the default).
func WithFailClosed() Option { return WithFailureMode(FailClosed) }

// WithFailureMode sets FailOpen or FailClosed.
func WithFailureMode(m FailureMode) Option {
	return func(l *Interceptor) {
		if m != FailOpen && m != FailClosed {
			l.fail("unknown failure mode %d", int(m))
		}
		l.failure = m
	}
}

// WithErrorHook sets a function called with every error the interceptors
// meet (Redis failures, ErrNoKey, ratelimiter.ErrPermitsExceedRate), for
// logging or metrics. It runs on the call's goroutine.
func WithErrorHook(f func(ctx context.Context, fullMethod string, err error)) Option {
	return func(l *Interceptor) { l.onError = f }
}

// WithDecisionHook sets a function called with the Decision on every call
// that got one (granted or refused, in shadow mode too), before the call
// is served or refused. It runs on the call's goroutine.
func WithDecisionHook(f func(ctx context.Context, d Decision)) Option {
	return func(l *Interceptor) { l.onDecision = f }
}

// WithShadow turns on shadow mode: every call is decided as usual (its
// permits are taken when available) and reported to the decision hook,
// the error hook and the Client's ratelimiter.Hooks, but served: nothing
// is refused, delayed (WithWait is not applied) or failed closed, and a
// call without a key is served after ErrNoKey goes to the error hook.
func WithShadow() Option { return func(l *Interceptor) { l.shadow = true } }

// WithPerMessage makes streams take permits for each message they receive
// (after it arrives, before the handler gets it) instead of once when they
// open: a refused message fails the handler's RecvMsg with the refusal
// status (ResourceExhausted with RetryInfo and QuotaFailure, and the
// pushback trailer), which a handler returns to end the stream. Waits,
// shadow mode and the failure mode apply to each message; FromContext
// finds no Decision in a stream's context. Unary calls are unchanged.
func WithPerMessage() Option { return func(l *Interceptor) { l.perMessage = true } }

// WithSkip makes the interceptors serve the calls for which skip returns
// true without a decision: no permits, no Redis call, no hooks, and no
// Decision in the handler's context (FromContext finds none). skip gets
// the call's context and full method ("/package.Service/Method"); for a
// stream it is asked once, when the stream opens, and a skipped stream's
// messages are not metered (WithPerMessage). SkipHealthAndReflection is
// one for gRPC's health and reflection services. A nil skip is an error
// (ErrInvalidOption).
func WithSkip(skip func(ctx context.Context, fullMethod string) bool) Option {
	return func(l *Interceptor) {
		if skip == nil {
			l.fail("nil skip function")
		}
		l.skip = skip
	}
}

// SkipHealthAndReflection reports whether fullMethod is a method of gRPC's
// health service (grpc.health.v1.Health) or server reflection
// (grpc.reflection.v1 and v1alpha): probes and tools that a rate limit
// should not refuse. Pass it to WithSkip.
func SkipHealthAndReflection(_ context.Context, fullMethod string) bool {
	for _, svc := range []string{"/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"} {
		if strings.HasPrefix(fullMethod, svc) {
			return true
		}
	}
	return false
}
