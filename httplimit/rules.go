package httplimit

import (
	"errors"
	"fmt"

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
	// request takes.
	Config ratelimiter.Config
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
// permits left, on a refusal the one that must wait longest, whose name is
// the policy of the RateLimit fields and Decision.Rule.
func WithRules(rules ...Rule) Option {
	return func(l *Middleware) {
		if l.rules != nil {
			l.err = errors.Join(l.err, fmt.Errorf("%w: WithRules given twice", ErrInvalidOption))
		}
		l.rules = make([]gate.Rule, len(rules))
		for i, r := range rules {
			l.rules[i] = gate.Rule{Name: r.Name, Config: r.Config}
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
