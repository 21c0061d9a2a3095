// Package httplimit is net/http middleware that rate-limits requests with
// the Redisson-compatible limiters of package ratelimiter.
//
// Each request is mapped by a key function (client IP by default, an API
// key, a route) to a limiter named Prefix+key. A limiter is configured on
// first use with the Config given to New (TrySetRate: a limiter that
// already exists, for example one whose rate an operator or a Java
// service changed, keeps its own configuration). A request that gets its
// permits goes on to the next handler; one that does not is answered 429
// Too Many Requests with Retry-After, or waits up to a bound when WithWait
// is given.
//
// Every distinct key makes a limiter of three keys in Redis that stays
// until deleted, unless Config.KeepAlive is set: with keys that clients
// choose (IP addresses, API keys, paths) set KeepAlive to a few intervals
// so that the limiters of clients that went away expire.
//
// Responses carry the RateLimit-Policy and RateLimit fields of the IETF
// httpapi draft "RateLimit header fields for HTTP",
// draft-ietf-httpapi-ratelimit-headers-11 (May 2026):
//
//	RateLimit-Policy: "default";q=10;w=1
//	RateLimit: "default";r=7;t=1
//
// q is the limiter's rate, w its interval in seconds (left out when the
// interval is not a whole number of seconds, since the draft has no
// sub-second windows), r the requests still available and t the seconds
// until the oldest permit in the window expires and more become available.
// All counts are in requests: the permits divided by the permits each
// request takes (WithPermits). On a refusal r is 0 and t equals
// Retry-After, as the draft asks.
//
// In shadow mode (WithShadow) every request is decided and reported as
// usual, to the decision hook, the Client's ratelimiter.Hooks and the
// headers, but served: nothing is refused or delayed. The handler finds
// the Decision, Shadow set, with FromContext.
//
// With WithRules, each request takes its permits from several limiters of
// its key at once ("10 per second and 1,000 per hour"), all or none, in
// one script call; the headers describe the rule that binds.
//
// For outgoing requests, Transport is an http.RoundTripper that takes
// permits from one limiter before each request, so that all the callers
// of a remote API that share the limiter stay under its limit.
//
// When Redis fails, the middleware by default fails open: the request is
// served unlimited and the error goes to the error hook. WithFailClosed
// makes it answer 503 Service Unavailable instead. With the Client
// option ratelimiter.WithOutageFallback (WithClientOptions), requests
// whose limiter the Client has seen are decided in this process while
// Redis is unreachable, at the fallback's share of the rate: the answer
// is the usual grant or 429, Decision.Degraded is set, the RateLimit
// fields describe the local limit (q is floor(share × rate)), and the
// failure mode applies only to limiters the Client has not seen (a key
// first met during the outage) and to Redis errors that are not
// connection failures. A limiter whose rate
// was lowered below the permits a request takes refuses every request
// (429, with the error also sent to the hook) in either mode.
//
// Protecting a handler:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 10, Interval: time.Second})
//	http.Handle("/api/", lim.Handler(api)) // once err is checked
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// ErrInvalidOption is returned by New for an option or Config outside its
// documented range. It matches ratelimiter.ErrInvalidArgument too.
var ErrInvalidOption = fmt.Errorf("%w: httplimit", ratelimiter.ErrInvalidArgument)

// ErrNoKey is passed to the error hook when the key function returns the
// empty string; the request is then answered 400 Bad Request.
var ErrNoKey = errors.New("httplimit: the key function returned no key for the request")

// FailureMode says what the middleware does when Redis (or the limiter)
// returns an error instead of a decision.
type FailureMode int

const (
	// FailOpen serves the request as if it had been granted, without
	// RateLimit headers. It is the default: a Redis outage does not take
	// the service down, but it is unlimited meanwhile.
	FailOpen FailureMode = iota
	// FailClosed answers 503 Service Unavailable: nothing gets through
	// unmetered while Redis is down.
	FailClosed
)

// Decision is what the middleware decided for a request. A refusal
// handler finds it with FromContext.
type Decision struct {
	// Key is the key function's result; Name the limiter's name
	// (Prefix + key, or a hash of the key when it is not a safe name).
	// With WithRules, Name is the binding rule's limiter (see
	// Middleware.Names).
	Key, Name string
	// Rule is, with WithRules, the name of the rule that binds: on a
	// grant the one with the fewest permits left, on a refusal the one
	// that must wait longest. It is "" without WithRules.
	Rule string
	// Tier is, with WithTiers, the tier whose limit applied; "" for the
	// default limit.
	Tier string
	// Granted reports whether the permits were taken.
	Granted bool
	// RetryAfter is the library's wait hint on a refusal, zero otherwise.
	RetryAfter time.Duration
	// Waited is how long the decision took, waiting for permits
	// (WithWait) included.
	Waited time.Duration
	// Shadow reports that the Middleware runs in shadow mode (WithShadow):
	// the request is served whatever Granted says.
	Shadow bool
	// Degraded reports that the decision was made in this process while
	// Redis was unreachable, by the Client's outage fallback
	// (ratelimiter.WithOutageFallback, given with WithClientOptions): a
	// grant or refusal at the fallback's share of the limiter's rate.
	Degraded bool
}

type ctxKey struct{}

// FromContext returns the Decision that the middleware stored in the
// request's context, and false when there is none (the request did not
// pass through a Middleware).
func FromContext(ctx context.Context) (Decision, bool) {
	d, ok := ctx.Value(ctxKey{}).(Decision)
	return d, ok
}

// Middleware is the middleware. Make it with New; it is safe for concurrent
// use and one Middleware can wrap any number of handlers, which then share
// the limiters of equal keys.
type Middleware struct {
	client     *ratelimiter.Client
	gate       *gate.Gate
	copts      []ratelimiter.Option
	cfg        ratelimiter.Config
	key        KeyFunc
	prefix     string
	permits    int64
	wait       time.Duration
	failure    FailureMode
	onError    func(*http.Request, error)
	onDecision func(*http.Request, Decision)
	refuse     http.Handler
	policy     string
	policySet  bool
	rules      []gate.Rule                 // WithRules; nil without
	ruleCosts  []func(*http.Request) int64 // Rule.Cost of each rule; nil entries for none
	// rulePolicies are the rules' RateLimit-Policy items as configured,
	// made once in New.
	rulePolicies []string
	headers      bool
	legacy       bool // WithLegacyHeaders
	legacyUnix   bool // WithLegacyResetUnix: X-RateLimit-Reset as a Unix time
	shadow       bool
	skip         func(*http.Request) bool   // WithSkip; nil: none
	cost         func(*http.Request) int64  // WithCost; nil: permits per request
	tierOf       func(*http.Request) string // WithTiers; nil: none
	tiers        map[string]ratelimiter.Config
	tierGates    map[string]*gate.Gate
	err          error
}

// New returns a Middleware that draws permits on rdb (a *redis.Client,
// *redis.ClusterClient or failover client) from limiters configured with
// cfg on first use. It fails with an error matching ErrInvalidOption (and
// ratelimiter.ErrInvalidArgument) for a nil rdb, an invalid cfg or
// option, or permits per request above cfg.Rate; it sends nothing to
// Redis. With WithRules, cfg must be the zero Config and each rule's
// Config is checked instead (see WithRules).
func New(rdb redis.UniversalClient, cfg ratelimiter.Config, opts ...Option) (*Middleware, error) {
	l := &Middleware{
		cfg:     cfg,
		key:     KeyByIP,
		prefix:  "http:",
		permits: 1,
		policy:  "default",
		headers: true,
		refuse:  http.HandlerFunc(tooManyRequests),
	}
	for _, o := range opts {
		if o == nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		o(l)
	}
	if rdb == nil {
		l.err = errors.Join(l.err, fmt.Errorf("%w: nil redis client", ErrInvalidOption))
	}
	if l.cost != nil && l.permits != 1 {
		l.err = errors.Join(l.err, fmt.Errorf("%w: WithCost and WithPermits(%d) both set", ErrInvalidOption, l.permits))
	}
	l.err = errors.Join(l.err, l.checkTiers())
	if l.rules != nil {
		l.err = errors.Join(l.err, l.checkRules(cfg))
	} else {
		l.err = errors.Join(l.err, validateConfig(cfg))
		if l.permits < 1 || l.permits > ratelimiter.MaxPermits || (cfg.Rate > 0 && l.permits > cfg.Rate) {
			l.err = errors.Join(l.err, fmt.Errorf("%w: permits per request %d must be from 1 to the rate %d", ErrInvalidOption, l.permits, cfg.Rate))
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
		for _, r := range l.rules {
			l.rulePolicies = append(l.rulePolicies, l.policyItem(r.Name, r.Config.Rate, r.Config.Interval))
		}
	} else {
		l.gate = gate.New(cfg, l.permits)
	}
	if l.tiers != nil {
		l.tierGates = make(map[string]*gate.Gate, len(l.tiers))
		for name, c := range l.tiers {
			l.tierGates[name] = gate.New(c, l.permits)
		}
	}
	return l, nil
}

// Client returns the ratelimiter.Client the Middleware draws permits with,
// for example to look at or change a key's limiter:
// l.Client().Limiter(l.Name(key)).
func (l *Middleware) Client() *ratelimiter.Client { return l.client }

// validateConfig runs the library's Config checks so that New can fail
// before any request (the library checks only when it is called).
func validateConfig(c ratelimiter.Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%w: config: %w", ErrInvalidOption, err)
	}
	return nil
}

// Handler returns next wrapped by the limiter: every request takes its
// permits before next runs, or is refused, waits or fails as configured.
func (l *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.serve(w, r, next)
	})
}

// HandlerFunc is Handler for a function.
func (l *Middleware) HandlerFunc(next http.HandlerFunc) http.Handler { return l.Handler(next) }

// Name returns the limiter name used for key: Prefix + key when the key is
// at most 128 printable ASCII characters without '{' or '}', otherwise
// Prefix + "sha256:" + the hex SHA-256 of the key, so that no request can
// choose a name that breaks Redis Cluster slots or bloats Redis. With
// WithRules it returns the first rule's limiter name, Names(key)[0].
func (l *Middleware) Name(key string) string { return l.Names(key)[0] }

func (l *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if l.skip != nil && l.skip(r) {
		next.ServeHTTP(w, r)
		return
	}
	key := l.key(r)
	if key == "" {
		l.report(r, ErrNoKey)
		if l.shadow {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "400 bad request: no rate limit key", http.StatusBadRequest)
		return
	}
	n := l.permits
	if l.cost != nil {
		if n = l.cost(r); n < 1 && !l.gate.Costed() {
			next.ServeHTTP(w, r) // free: no decision
			return
		}
	}
	g, prefix, tier := l.gateFor(r)
	names := g.Names(prefix, key)
	t := g.Target(l.client, names)
	if g.Costed() {
		// Each rule its own permits (Rule.Cost), in one call of 1.
		var free bool
		if t, free = g.Weighted(l.client, names, l.weights(r, n)); free {
			next.ServeHTTP(w, r)
			return
		}
		n = 1
	}
	d := Decision{Key: key, Name: names[0], Tier: tier, Shadow: l.shadow}
	o, err := g.DecideN(r.Context(), t, n, l.wait, l.shadow)
	d.Waited = o.Waited
	if p := o.Result.Part; p > 0 && p < len(names) {
		d.Name = names[p]
	}
	d.Rule = g.Rule(o.Result.Part)
	if o.Note != nil {
		l.report(r, o.Note)
	}
	if err != nil {
		l.failed(w, r, next, err)
		return
	}
	d.Granted, d.RetryAfter, d.Degraded = o.Result.Granted, o.Result.RetryAfter, o.Result.Degraded
	if l.onDecision != nil {
		l.onDecision(r, d)
	}
	if l.headers {
		policy := d.Rule
		if policy == "" {
			policy = d.Tier
		}
		l.setHeaders(w.Header(), o, policy)
	}
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, d))
	if !d.Granted && !l.shadow {
		w.Header().Set("Retry-After", strconv.FormatInt(retrySeconds(d.RetryAfter), 10))
		l.refuse.ServeHTTP(w, r)
		return
	}
	next.ServeHTTP(w, r)
}

// failed answers a request that got an error instead of a decision.
func (l *Middleware) failed(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		// The client has gone (or the server is shutting down): there is
		// nobody to answer. A request whose deadline passed is still
		// waiting for one: it falls through to the failure mode.
		return
	}
	l.report(r, err)
	if l.failure == FailClosed && !l.shadow {
		http.Error(w, "503 service unavailable: rate limiter unavailable", http.StatusServiceUnavailable)
		return
	}
	next.ServeHTTP(w, r)
}

func (l *Middleware) report(r *http.Request, err error) {
	if l.onError != nil {
		l.onError(r, err)
	}
}

func tooManyRequests(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "429 too many requests", http.StatusTooManyRequests)
}

// retrySeconds is the Retry-After value for a hint: whole seconds rounded
// up, at least 1.
func retrySeconds(hint time.Duration) int64 { return max(ceilSeconds(hint), 1) }

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

func policyName(s string) bool { return gate.Token(s, 64) }
