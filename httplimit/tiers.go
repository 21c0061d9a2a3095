package httplimit

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// WithTiers gives classes of clients limits of their own: tierOf names a
// request's tier (from an API key's plan, a header, a claim), and a
// request of a tier in tiers takes its permits from the limiter
// Prefix + tier + ":" + key, configured on first use with that tier's
// Config; a request of any other tier ("" included) uses New's Config and
// Prefix + key. The tier names the policy in the RateLimit fields and is
// Decision.Tier. Tier names must be 1 to 64 letters, digits, '-', '_' or
// '.'; every Config must be valid
// and at least the permits per request. It cannot be combined with
// WithRules. New fails with ErrInvalidOption otherwise.
func WithTiers(tierOf func(r *http.Request) string, tiers map[string]ratelimiter.Config) Option {
	return func(l *Middleware) {
		if tierOf == nil || len(tiers) == 0 {
			l.err = errors.Join(l.err, fmt.Errorf("%w: WithTiers needs a tier function and at least one tier", ErrInvalidOption))
		}
		l.tierOf, l.tiers = tierOf, tiers
	}
}

// checkTiers returns why the tiers cannot be used, or nil.
func (l *Middleware) checkTiers() error {
	if l.tiers == nil {
		return nil
	}
	var err error
	if l.rules != nil {
		err = errors.Join(err, fmt.Errorf("%w: WithTiers and WithRules both set", ErrInvalidOption))
	}
	for name, c := range l.tiers {
		if !gate.Token(name, 64) {
			err = errors.Join(err, fmt.Errorf("%w: tier name %q must be a token of at most 64 characters", ErrInvalidOption, name))
		}
		if e := validateConfig(c); e != nil {
			err = errors.Join(err, fmt.Errorf("tier %q: %w", name, e))
		} else if l.permits > c.Rate {
			err = errors.Join(err, fmt.Errorf("%w: tier %q: permits per request %d above its rate %d", ErrInvalidOption, name, l.permits, c.Rate))
		}
	}
	return err
}

// gateFor returns the Gate, name prefix and tier that decide r.
func (l *Middleware) gateFor(r *http.Request) (*gate.Gate, string, string) {
	if l.tierOf != nil {
		t := l.tierOf(r)
		if g, ok := l.tierGates[t]; ok {
			return g, l.prefix + t + ":", t
		}
	}
	return l.gate, l.prefix, ""
}
