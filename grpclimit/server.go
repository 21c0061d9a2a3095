package grpclimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// Decision is what an Interceptor decided for a call. A handler finds it
// with FromContext.
type Decision struct {
	// FullMethod is the call's method, "/package.Service/Method".
	FullMethod string
	// Key is the key function's result; Name the limiter's name
	// (Prefix + key, or a hash of the key when it is not a safe name).
	// With WithRules, Name is the binding rule's limiter (see
	// Interceptor.Names).
	Key, Name string
	// Rule is, with WithRules, the name of the rule that binds: on a
	// grant the one with the fewest permits left, on a refusal the one
	// that must wait longest. It is "" without WithRules.
	Rule string
	// Granted reports whether the permits were taken.
	Granted bool
	// RetryAfter is the library's wait hint on a refusal, zero otherwise.
	RetryAfter time.Duration
	// Waited is how long the decision took, waiting for permits
	// (WithWait) included.
	Waited time.Duration
	// Shadow reports that the Interceptor runs in shadow mode: the call is
	// served whatever Granted says.
	Shadow bool
	// Degraded reports that the decision was made in this process while
	// Redis was unreachable, by the Client's outage fallback
	// (ratelimiter.WithOutageFallback, given with WithClientOptions): a
	// grant or refusal at the fallback's share of the limiter's rate.
	Degraded bool
}

type ctxKey struct{}

// FromContext returns the Decision that an Interceptor stored in the
// call's context, and false when there is none.
func FromContext(ctx context.Context) (Decision, bool) {
	d, ok := ctx.Value(ctxKey{}).(Decision)
	return d, ok
}

// Interceptor holds the server interceptors. Make it with New; it is safe
// for concurrent use, and its Unary and Stream interceptors share the
// limiters of equal keys.
type Interceptor struct {
	client     *ratelimiter.Client
	gate       *gate.Gate
	copts      []ratelimiter.Option
	key        KeyFunc
	prefix     string
	permits    int64
	rules      []gate.Rule                                // WithRules; nil without
	ruleCosts  []func(context.Context, string, any) int64 // Rule.Cost of each rule
	wait       time.Duration
	failure    FailureMode
	onError    func(context.Context, string, error)
	onDecision func(context.Context, Decision)
	shadow     bool
	perMessage bool                                              // WithPerMessage
	skip       func(ctx context.Context, fullMethod string) bool // WithSkip; nil: none
	err        error
}

// New returns an Interceptor that draws permits on rdb (a *redis.Client,
// *redis.ClusterClient or failover client) from limiters configured with
// cfg on first use. It fails with an error matching ErrInvalidOption (and
// ratelimiter.ErrInvalidArgument) for a nil rdb, an invalid cfg or
// option, or permits per call above cfg.Rate; it sends nothing to Redis.
// With WithRules, cfg must be the zero Config and each rule's Config is
// checked instead (see WithRules).
func New(rdb redis.UniversalClient, cfg ratelimiter.Config, opts ...Option) (*Interceptor, error) {
	l := &Interceptor{key: KeyByPeer, prefix: "grpc:", permits: 1}
	for _, o := range opts {
		if o == nil {
			l.fail("nil option")
			continue
		}
		o(l)
	}
	if rdb == nil {
		l.fail("nil redis client")
	}
	if l.rules != nil {
		l.checkRules(cfg)
	} else {
		if err := cfg.Validate(); err != nil {
			l.fail("config: %w", err)
		}
		if l.permits < 1 || l.permits > ratelimiter.MaxPermits || (cfg.Rate > 0 && l.permits > cfg.Rate) {
			l.fail("permits per call %d must be from 1 to the rate %d", l.permits, cfg.Rate)
		}
	}
	if l.err != nil {
		return nil, l.err
	}
	l.client = ratelimiter.NewClient(rdb, l.copts...)
	if err := l.client.Err(); err != nil {
		return nil, fmt.Errorf("%w: client option: %w", ErrInvalidOption, err)
	}
	if l.rules != nil {
		l.gate = gate.NewRules(l.rules, l.permits)
	} else {
		l.gate = gate.New(cfg, l.permits)
	}
	return l, nil
}

// Client returns the ratelimiter.Client the Interceptor draws permits
// with, for example to look at a key's limiter:
// l.Client().Limiter(l.Name(key)).
func (l *Interceptor) Client() *ratelimiter.Client { return l.client }

// Name returns the limiter name used for key: Prefix + key when the key is
// at most 128 printable ASCII characters without '{' or '}', otherwise
// Prefix + "sha256:" + the hex SHA-256 of the key. With WithRules it
// returns the first rule's limiter name, Names(key)[0].
func (l *Interceptor) Name(key string) string { return l.Names(key)[0] }

// Unary returns the unary server interceptor: each call takes its permits
// before the handler runs, or fails, waits or is served as configured.
func (l *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if l.skipped(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, err := l.admit(ctx, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Limit decides a call as Unary and Stream do, for the interceptors of
// go-grpc-middleware v2's ratelimit package: *Interceptor is its Limiter.
// It returns nil to serve the call (a grant, shadow mode, or a failure
// under FailOpen) and otherwise the error Unary would fail the call with;
// that package wraps it in a ResourceExhausted status of its own, which
// keeps its text but drops the details (RetryInfo, QuotaFailure); the
// pushback trailer (PushbackTrailer), set on ctx, reaches the client. The
// method comes from ctx (grpc.Method); the decision is not passed on to
// the handler (FromContext finds none).
func (l *Interceptor) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	if l.skipped(ctx, method) {
		return nil
	}
	_, err := l.admit(ctx, method, nil)
	return err
}

// Stream returns the stream server interceptor: each stream takes its
// permits once, when it opens, before the handler runs.
func (l *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if l.skipped(ss.Context(), info.FullMethod) {
			return handler(srv, ss)
		}
		if l.perMessage {
			return handler(srv, &metered{ServerStream: ss, l: l, method: info.FullMethod})
		}
		ctx, err := l.admit(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		return handler(srv, &stream{ServerStream: ss, ctx: ctx})
	}
}

// metered is a ServerStream that takes permits for each message it
// receives (WithPerMessage).
type metered struct {
	grpc.ServerStream
	l      *Interceptor
	method string
}

// RecvMsg receives a message, then takes its permits: a refusal (or a
// failure under FailClosed) is returned in its place, and the handler,
// which sees the error, ends the stream with it.
func (s *metered) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	_, err := s.l.admit(s.Context(), s.method, m)
	return err
}

// stream is a ServerStream whose context carries the Decision.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the stream's context with the Decision.
func (s *stream) Context() context.Context { return s.ctx }

// skipped reports whether WithSkip serves the call to method without a
// decision.
func (l *Interceptor) skipped(ctx context.Context, method string) bool {
	return l.skip != nil && l.skip(ctx, method)
}

// admit decides a call; msg is what Rule.Cost reads. It returns the
// context for the handler, or the error to fail the call with.
func (l *Interceptor) admit(ctx context.Context, method string, msg any) (context.Context, error) {
	key := l.key(ctx, method)
	if key == "" {
		l.report(ctx, method, ErrNoKey)
		if l.shadow {
			return ctx, nil
		}
		return nil, status.Error(codes.InvalidArgument, "no rate limit key for the call")
	}
	names := l.Names(key)
	t, n := l.gate.Target(l.client, names), l.permits
	if l.gate.Costed() {
		// Each rule its own permits (Rule.Cost), in one call of 1.
		var free bool
		if t, free = l.gate.Weighted(l.client, names, l.weights(ctx, method, msg)); free {
			return ctx, nil
		}
		n = 1
	}
	d := Decision{FullMethod: method, Key: key, Name: names[0], Shadow: l.shadow}
	o, err := l.gate.DecideN(ctx, t, n, l.wait, l.shadow)
	d.Waited = o.Waited
	if p := o.Result.Part; p > 0 && p < len(names) {
		d.Name = names[p]
	}
	d.Rule = l.gate.Rule(o.Result.Part)
	if o.Note != nil {
		l.report(ctx, method, o.Note)
	}
	if err != nil {
		return l.failed(ctx, method, err)
	}
	d.Granted, d.RetryAfter, d.Degraded = o.Result.Granted, o.Result.RetryAfter, o.Result.Degraded
	if l.onDecision != nil {
		l.onDecision(ctx, d)
	}
	if !d.Granted && !l.shadow {
		// grpc-go's retry policy waits this instead of its backoff when
		// the code is retryable (gRFC A6); the error is returned anyway.
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackTrailer, pushbackMillis(o.Result.RetryAfter)))
		return nil, refusal(d.Name, quota{rule: d.Rule, key: key, method: method}, o.Result).Err()
	}
	return context.WithValue(ctx, ctxKey{}, d), nil
}

// failed handles a call that got an error instead of a decision.
func (l *Interceptor) failed(ctx context.Context, method string, err error) (context.Context, error) {
	l.report(ctx, method, err)
	if ctx.Err() != nil {
		// The client canceled the call or its deadline passed: it has
		// stopped waiting (a gRPC client enforces its deadline itself),
		// so the handler's work would be lost.
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if l.failure == FailClosed && !l.shadow {
		return nil, status.Error(codes.Unavailable, "rate limiter unavailable")
	}
	return ctx, nil
}

func (l *Interceptor) report(ctx context.Context, method string, err error) {
	if l.onError != nil {
		l.onError(ctx, method, err)
	}
}
