package grpclimit

import (
	"context"
	"fmt"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// Rule is one of several limits that every call takes permits from at
// once (WithRules), for example 10 per second and 1,000 per hour.
type Rule struct {
	// Name names the rule: it ends the name of the rule's limiter (see
	// Interceptor.Names) and is Decision.Rule when the rule binds. It must
	// be 1 to 64 letters, digits, '-', '_' or '.', and differ from the
	// other rules' names.
	Name string
	// Config configures the rule's limiter of each key on first use
	// (TrySetRate: a limiter that exists keeps its configuration). It must
	// be valid (Config.Validate), with a rate of at least the permits each
	// call takes (for a rule without Cost).
	Config ratelimiter.Config
	// Cost, when not nil, is the permits a call takes from this rule's
	// limiter, in place of WithPermits' that the rules without Cost take:
	// "1 call and 750 tokens" is a rule of calls without Cost and a rule
	// of tokens whose Cost reads the tokens from the request. msg is the
	// unary call's request, the received message with WithPerMessage, and
	// nil when a stream opens or for Limit. A cost below 1 leaves the
	// rule's limiter untouched for that call; a call that takes nothing
	// from any rule is served without a decision (free). A cost above the
	// rule's rate is refused and reported to the error hook
	// (ErrPermitsExceedRate). The call still takes from every rule at
	// once or from none, in one script call
	// (ratelimiter.Composite.Weighted). Give back what a call did not use
	// with Interceptor.Release.
	Cost func(ctx context.Context, fullMethod string, msg any) int64
}

// WithRules makes every call take its permits from several limiters of
// its key at once, one per rule, all or none, in one script call
// (ratelimiter.Client.All): a call refused by one rule takes nothing from
// the others. New's Config must then be the zero Config, since each rule
// has its own. Give 1 to ratelimiter.MaxParts rules; New fails with
// ErrInvalidOption for none, too many, a name given twice or not a token,
// an invalid Config or a rate below WithPermits, and for WithRules given
// twice.
//
// The rules of one key are limiters named Prefix + "{" + key + "}:" +
// rule name (a key that is not a safe name is hashed as in Name, inside
// the braces), so that they share one Redis Cluster hash slot. Each is an
// ordinary limiter that Java services can use alone.
//
// The Decision and a refusal's details describe the rule that binds
// (ratelimiter.Result.Part): on a grant the one with the fewest permits
// left (with a Rule.Cost, the one that could grant the fewest more such
// calls), on a refusal the one that must wait longest. RetryInfo carries
// the time until every rule can grant, QuotaFailure the binding rule's
// limiter and rate.
func WithRules(rules ...Rule) Option {
	return func(l *Interceptor) {
		if l.rules != nil {
			l.fail("WithRules given twice")
		}
		l.rules = make([]gate.Rule, len(rules))
		l.ruleCosts = make([]func(context.Context, string, any) int64, len(rules))
		for i, r := range rules {
			l.rules[i] = gate.Rule{Name: r.Name, Config: r.Config, Costed: r.Cost != nil}
			l.ruleCosts[i] = r.Cost
		}
	}
}

// checkRules records why the rules (and New's cfg with them) are not
// usable.
func (l *Interceptor) checkRules(cfg ratelimiter.Config) {
	if cfg != (ratelimiter.Config{}) {
		l.fail("with WithRules, New's Config must be the zero Config (each rule has its own)")
	}
	if l.permits < 1 || l.permits > ratelimiter.MaxPermits {
		l.fail("permits per call %d must be from 1 to every rule's rate", l.permits)
	}
	if err := gate.CheckRules(l.rules, l.permits); err != nil {
		l.fail("%w", err)
	}
}

// Names returns the names of the limiters that calls of key take permits
// from: with WithRules one per rule, in order,
// Prefix + "{" + key + "}:" + rule name (or Prefix + "{sha256:" + the hex
// SHA-256 of key + "}:" + rule name, for a key that Name would hash);
// otherwise just Name(key).
func (l *Interceptor) Names(key string) []string { return l.gate.Names(l.prefix, key) }

// weights returns the permits a call takes from each rule: the rule's
// Cost, or the permits per call for a rule without one.
func (l *Interceptor) weights(ctx context.Context, method string, msg any) []int64 {
	w := make([]int64, len(l.ruleCosts))
	for i, cost := range l.ruleCosts {
		if cost != nil {
			w[i] = cost(ctx, method, msg)
		} else {
			w[i] = l.permits
		}
	}
	return w
}

// Release gives back to the limiters of key, at once, permits a call
// took but did not use: weights[i] to rule i (0: that rule's limiter is
// not touched), as ratelimiter.Composite.Release gives back, from the
// oldest records in each window, never past a rate; permits whose
// records already left their window are not given back (they came back
// when the window moved). Call it once the handler knows what the call
// used, with the key from FromContext. It fails with an error matching
// ErrInvalidOption without WithRules, and otherwise with the errors of
// Composite.Weighted and Composite.Release.
func (l *Interceptor) Release(ctx context.Context, key string, weights ...int64) error {
	if l.rules == nil {
		return fmt.Errorf("%w: Release needs WithRules", ErrInvalidOption)
	}
	return l.client.All(l.Names(key)...).Weighted(weights...).Release(ctx, 1)
}
