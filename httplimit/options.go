package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// Option configures a Middleware.
type Option func(*Middleware)

// WithKey sets the key function; the default is KeyByIP.
func WithKey(f KeyFunc) Option {
	return func(l *Middleware) {
		if f == nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: nil key function", ErrInvalidOption))
		}
		l.key = f
	}
}

// WithClientOptions passes options (client id, name mapper, member
// format, clock) to the ratelimiter.Client the Middleware makes on rdb. Java
// services sharing the limiters must use the same name mapping and a
// member format they read.
func WithClientOptions(opts ...ratelimiter.Option) Option {
	return func(l *Middleware) {
		for _, o := range opts {
			if o == nil {
				l.err = errors.Join(l.err, fmt.Errorf("%w: nil client option", ErrInvalidOption))
				continue
			}
			l.copts = append(l.copts, o)
		}
	}
}

// WithPrefix sets the text put before every key to name its limiter; the
// default is "http:". It must not contain '{' or '}', which would change
// Redis Cluster hash slots.
func WithPrefix(p string) Option {
	return func(l *Middleware) {
		if !gate.SafeName(p, gate.MaxKeyLen) {
			l.err = errors.Join(l.err, fmt.Errorf("%w: prefix %q must be at most %d printable ASCII characters without '{' or '}'", ErrInvalidOption, p, gate.MaxKeyLen))
		}
		l.prefix = p
	}
}

// WithPermits sets the permits each request takes (default 1); it must be
// from 1 to the Config's rate.
func WithPermits(n int64) Option {
	return func(l *Middleware) { l.permits = n }
}

// WithWait makes a request that finds no permits wait up to max for them
// before it is refused. The request first tries once (Allow, whose reply
// gives the RateLimit fields); when the wait hint passes max or the
// request's context deadline it is refused at once, otherwise it waits
// behind the limiter's other waiters (TryAcquireTimeout). A request
// canceled while waiting (the client hung up) is dropped: the next
// handler is not called. The default, 0, refuses at once.
func WithWait(max time.Duration) Option {
	return func(l *Middleware) {
		if max < 0 {
			l.err = errors.Join(l.err, fmt.Errorf("%w: negative wait %v", ErrInvalidOption, max))
		}
		l.wait = max
	}
}

// WithFailClosed makes the middleware answer 503 Service Unavailable when
// Redis fails, instead of serving the request (FailOpen, the default).
func WithFailClosed() Option { return WithFailureMode(FailClosed) }

// WithFailureMode sets FailOpen or FailClosed.
func WithFailureMode(m FailureMode) Option {
	return func(l *Middleware) {
		if m != FailOpen && m != FailClosed {
			l.err = errors.Join(l.err, fmt.Errorf("%w: unknown failure mode %d", ErrInvalidOption, int(m)))
		}
		l.failure = m
	}
}

// WithErrorHook sets a function called with every error the middleware
// meets (Redis failures, ErrNoKey), for logging or metrics. It runs on the
// request's goroutine before the response is written; it must not write
// to the response.
func WithErrorHook(f func(r *http.Request, err error)) Option {
	return func(l *Middleware) { l.onError = f }
}

// WithRefusalHandler sets the handler that writes refused requests'
// responses. When it runs, Retry-After and the RateLimit fields are
// already set on the response headers and FromContext(r.Context()) gives
// the Decision; it must write the status itself (usually 429). The
// default writes 429 with a short text body.
func WithRefusalHandler(h http.Handler) Option {
	return func(l *Middleware) {
		if h == nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: nil refusal handler", ErrInvalidOption))
		}
		l.refuse = h
	}
}

// WithPolicyName sets the policy identifier in the RateLimit-Policy and
// RateLimit fields; the default is "default". It must be a token of
// letters, digits and "-_.". With WithRules the policy is the binding
// rule's name and WithPolicyName is an error.
func WithPolicyName(name string) Option {
	return func(l *Middleware) {
		l.policySet = true
		if !policyName(name) {
			l.err = errors.Join(l.err, fmt.Errorf("%w: policy name %q must be 1 to 64 letters, digits, '-', '_' or '.'", ErrInvalidOption, name))
		}
		l.policy = name
	}
}

// WithoutHeaders leaves out the RateLimit-Policy and RateLimit fields.
// Retry-After is still sent on refusals.
func WithoutHeaders() Option { return func(l *Middleware) { l.headers = false } }

// WithDecisionHook sets a function called with the Decision on every
// request that got one (granted or refused, in shadow mode too), before
// the request is served or refused. It runs on the request's goroutine;
// it must not write to the response.
func WithDecisionHook(f func(r *http.Request, d Decision)) Option {
	return func(l *Middleware) { l.onDecision = f }
}

// WithShadow turns on shadow mode: every request is decided as usual (its
// permits are taken when available) and reported to the decision hook,
// the error hook and the Client's ratelimiter.Hooks, and gets the
// RateLimit fields unless WithoutHeaders is given, but it is served:
// nothing is refused, delayed (WithWait is not applied) or failed closed.
// A request without a key is served too, after ErrNoKey goes to the error
// hook. Use it to see what a limit would refuse before enforcing it.
func WithShadow() Option { return func(l *Middleware) { l.shadow = true } }

// WithSkip makes the middleware serve the requests for which skip returns
// true without a decision: no permits, no Redis call, no headers, no
// hooks (health checks, metrics scrapes). A nil skip is an error
// (ErrInvalidOption).
func WithSkip(skip func(r *http.Request) bool) Option {
	return func(l *Middleware) {
		if skip == nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: nil skip function", ErrInvalidOption))
		}
		l.skip = skip
	}
}

// WithLegacyHeaders adds X-RateLimit-Limit (requests per window),
// X-RateLimit-Remaining and X-RateLimit-Reset (by default seconds until
// the oldest permit in the window expires, or the retry hint on a
// refusal; WithLegacyResetUnix writes a Unix time instead) beside the
// RateLimit fields, for clients that still parse the older names. They
// carry the same figures as RateLimit and RateLimit-Policy's binding
// policy, and are left out when the headers are (WithoutHeaders).
func WithLegacyHeaders() Option { return func(l *Middleware) { l.legacy = true } }

// WithLegacyResetUnix turns the legacy headers on (WithLegacyHeaders) with
// X-RateLimit-Reset as a Unix time in seconds (this process's clock plus
// the seconds RateLimit's t gives), as ulule/limiter and GitHub's API
// write it, instead of seconds from now.
func WithLegacyResetUnix() Option {
	return func(l *Middleware) { l.legacy, l.legacyUnix = true, true }
}

// WithCost makes each request take cost(r) permits instead of a fixed
// number: a request's price in tokens, bytes or work. A cost below 1
// serves the request without a decision (free). A cost above the rate is
// refused, as WithPermits above the rate is, and reported to the error
// hook (ErrPermitsExceedRate). With WithCost the RateLimit fields count
// permits, not requests. With WithRules of which a Rule has its own
// Cost, cost(r) is what the rules without Cost take, and a cost below 1
// leaves those rules alone (the request is free only when every rule's
// permits are below 1). It cannot be combined with WithPermits other
// than 1; a nil cost is an error (ErrInvalidOption).
func WithCost(cost func(r *http.Request) int64) Option {
	return func(l *Middleware) {
		if cost == nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: nil cost function", ErrInvalidOption))
		}
		l.cost = cost
	}
}
