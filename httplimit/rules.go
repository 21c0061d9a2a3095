package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// Rule is one of several limits that every request takes permits from
// at once (WithRules), for example 10 per second and 1,000 per hour.
type Rule struct {
	// Name names the rule: it ends the name of the rule's limiter (see
	// Middleware.Names) and is the policy of the RateLimit fields when the
	// rule binds. It must be 1 to 64 letters, digits, '-', '_' or '.', and
	// differ from the other rules' names.
	Name string
	// Config configures the rule's limiter of each key on first use
	// (TrySetRate: a limiter that exists keeps its configuration). It must
	// be valid (Config.Validate), with a rate of at least the permits each
	// request takes (for a rule without Cost).
	Config ratelimiter.Config
	// Cost, when not nil, is the permits a request takes from this rule's
	// limiter, in place of the request's permits (WithPermits, or
	// WithCost's cost) that the rules without Cost take: "1 request and
	// 750 tokens" is a rule of requests without Cost and a rule of tokens
	// whose Cost reads the tokens the request asks for. A cost below 1
	// leaves the rule's limiter untouched for that request; a request
	// that takes nothing from any rule is served without a decision
	// (free), as with WithCost. A cost above the rule's rate is refused
	// and reported to the error hook (ErrPermitsExceedRate), as WithCost
	// does. The request still takes from every rule at once or from none,
	// in one script call (ratelimiter.Composite.Weighted), and the
	// RateLimit fields of a rule count its own permits. Give back what a
	// request did not use with Middleware.Release.
	Cost func(r *http.Request) int64
}

// WithRules makes every request take its permits from several limiters
// of its key at once, one per rule, all or none, in one script call
// (ratelimiter.Client.All): a request refused by one rule takes nothing
// from the others. New's Config must then be the zero Config, since each
// rule has its own. Give 1 to ratelimiter.MaxParts rules; New fails with
// ErrInvalidOption for none, too many, a name given twice or not a token,
// an invalid Config or a rate below WithPermits, and for WithRules
// combined with WithPolicyName or given twice.
//
// The rules of one key are limiters named Prefix + "{" + key + "}:" +
// rule name (a key that is not a safe name is hashed as in Name, inside
// the braces), so that they share one Redis Cluster hash slot. Each is an
// ordinary limiter that Java services can use alone.
//
// The Decision, the RateLimit fields and Retry-After describe the rule
// that binds (ratelimiter.Result.Part): on a grant the one with the fewest
// permits left (with a Rule.Cost, the one that could grant the fewest
// more such requests), on a refusal the one that must wait longest, whose
// name is the policy of the RateLimit fields and Decision.Rule.
func WithRules(rules ...Rule) Option {
	return func(l *Middleware) {
		if l.rules != nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: WithRules given twice", ErrInvalidOption))
		}
		l.rules = make([]gate.Rule, len(rules))
		l.ruleCosts = make([]func(*http.Request) int64, len(rules))
		for i, r := range rules {
			l.rules[i] = gate.Rule{Name: r.Name, Config: r.Config, Costed: r.Cost != nil}
			l.ruleCosts[i] = r.Cost
		}
	}
}

// checkRules returns why the rules (and New's cfg with them) are not
// usable, or nil.
func (l *Middleware) checkRules(cfg ratelimiter.Config) error {
	var err error
	if cfg != (ratelimiter.Config{}) {
		err = fmt.Errorf("%w: with WithRules, New's Config must be the zero Config (each rule has its own)", ErrInvalidOption)
	}
	if l.policySet {
		err = errors.Join(err, fmt.Errorf("%w: WithPolicyName with WithRules (the rules' names are the policies)", ErrInvalidOption))
	}
	if l.permits < 1 || l.permits > ratelimiter.MaxPermits {
		err = errors.Join(err, fmt.Errorf("%w: permits per request %d must be from 1 to every rule's rate", ErrInvalidOption, l.permits))
	}
	if e := gate.CheckRules(l.rules, l.permits); e != nil {
		err = errors.Join(err, fmt.Errorf("%w: %w", ErrInvalidOption, e))
	}
	return err
}

// Names returns the names of the limiters that requests of key take
// permits from: with WithRules one per rule, in order,
// Prefix + "{" + key + "}:" + rule name (or Prefix + "{sha256:" + the hex
// SHA-256 of key + "}:" + rule name, for a key that Name would hash);
// otherwise just Name(key).
func (l *Middleware) Names(key string) []string { return l.gate.Names(l.prefix, key) }

// weights returns the permits a request takes from each rule: the rule's
// Cost, or n (the request's permits) for a rule without one; below 0
// counts as 0.
func (l *Middleware) weights(r *http.Request, n int64) []int64 {
	w := make([]int64, len(l.ruleCosts))
	for i, cost := range l.ruleCosts {
		if cost != nil {
			w[i] = cost(r)
		} else {
			w[i] = n
		}
		w[i] = max(w[i], 0)
	}
	return w
}

// Release gives back to the limiters of key, at once, permits a request
// took but did not use: weights[i] to rule i (0: that rule's limiter is
// not touched), as ratelimiter.Composite.Release gives back, from the
// oldest records in each window, never past a rate; permits whose
// records already left their window are not given back (they came back
// when the window moved). Call it after the handler knows what the
// request used, for example with the key from FromContext. It fails with
// an error matching ErrInvalidOption without WithRules, and otherwise
// with the errors of Composite.Weighted and Composite.Release.
func (l *Middleware) Release(ctx context.Context, key string, weights ...int64) error {
	if l.rules == nil {
		return fmt.Errorf("%w: Release needs WithRules", ErrInvalidOption)
	}
	return l.client.All(l.Names(key)...).Weighted(weights...).Release(ctx, 1)
}
