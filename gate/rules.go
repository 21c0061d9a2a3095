package gate

import (
	"errors"
	"fmt"

	"github.com/goredisson/ratelimiter"
)

// MaxRuleLen is the longest rule name.
const MaxRuleLen = 64

// Rule is one of several limits that every request takes permits from at
// once, under its own Config.
type Rule struct {
	Name   string
	Config ratelimiter.Config
	// Costed is true for a rule with a cost of its own per request (see
	// Weighted): the permits per request do not apply to it.
	Costed bool
}

// CheckRules returns, joined, why rules cannot be a middleware's rules
// for permits per request, or nil: none or more than ratelimiter.MaxParts,
// a name that is not a Token or is given twice, an invalid Config, or a
// rate below permits (for a rule that is not Costed). The errors match
// ratelimiter.ErrInvalidArgument.
func CheckRules(rules []Rule, permits int64) error {
	var err error
	bad := func(format string, args ...any) {
		err = errors.Join(err, fmt.Errorf("%w: "+format, append([]any{ratelimiter.ErrInvalidArgument}, args...)...))
	}
	if len(rules) == 0 || len(rules) > ratelimiter.MaxParts {
		bad("%d rules, not in [1, %d]", len(rules), ratelimiter.MaxParts)
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if !Token(r.Name, MaxRuleLen) {
			bad("rule name %q must be 1 to %d letters, digits, '-', '_' or '.'", r.Name, MaxRuleLen)
		}
		if seen[r.Name] {
			bad("rule %q given twice", r.Name)
		}
		seen[r.Name] = true
		if e := r.Config.Validate(); e != nil {
			bad("rule %q: config: %w", r.Name, e)
		} else if !r.Costed && permits > r.Config.Rate {
			bad("rule %q: permits per request %d above its rate %d", r.Name, permits, r.Config.Rate)
		}
	}
	return err
}

// NewRules returns a Gate for rules (checked with CheckRules): its
// Targets are the composites of one limiter per rule (see Target), each
// configured with its rule's Config on first use.
func NewRules(rules []Rule, permits int64) *Gate {
	cfgs := make([]ratelimiter.Config, len(rules))
	names := make([]string, len(rules))
	g := NewParts(cfgs, permits)
	for i, r := range rules {
		cfgs[i], names[i] = r.Config, r.Name
		g.costed = g.costed || r.Costed
	}
	g.rules = names
	return g
}

// Names returns the names of key's limiters: Name(prefix, key) for a
// Gate made with New, and for one made with NewRules one name per rule,
// RuleName(prefix, key, rule).
func (g *Gate) Names(prefix, key string) []string {
	if g.rules == nil {
		return []string{Name(prefix, key)}
	}
	names := make([]string, len(g.rules))
	for i, r := range g.rules {
		names[i] = RuleName(prefix, key, r)
	}
	return names
}

// Target returns what requests of key take permits from on c: the
// limiter names[0] for a Gate made with New, the composite
// c.All(names...) for one made with NewRules; names come from Names.
func (g *Gate) Target(c *ratelimiter.Client, names []string) Target {
	if g.rules == nil {
		return c.Limiter(names[0])
	}
	return c.All(names...)
}

// Costed reports whether any rule of a Gate made with NewRules has a cost
// of its own: its requests then take Weighted permits (see Weighted).
func (g *Gate) Costed() bool { return g.costed }

// Weighted returns what a request of key takes permits from on a Gate
// made with NewRules when rule i takes weights[i] permits (0: its limiter
// is not touched): c.All(names...).Weighted(weights...), to be decided
// for 1 permit (DecideN). free is true, and the Target nil, when every
// weight is 0 or less: the request takes nothing. A negative weight
// counts as 0.
func (g *Gate) Weighted(c *ratelimiter.Client, names []string, weights []int64) (t Target, free bool) {
	w := make([]int64, len(weights))
	free = true
	for i, x := range weights {
		w[i] = max(x, 0)
		free = free && w[i] == 0
	}
	if free {
		return nil, true
	}
	return c.All(names...).Weighted(w...), false
}

// Rule returns the name of rule i of a Gate made with NewRules, and ""
// for one made with New or an i out of range.
func (g *Gate) Rule(i int) string {
	if i < 0 || i >= len(g.rules) {
		return ""
	}
	return g.rules[i]
}

// RuleName returns the name of rule's limiter for key: prefix + "{" + tag
// + "}:" + rule, where tag is key itself, or "sha256:" + its hex SHA-256
// when it is not a safe name (see Name), so that it never holds '{' or
// '}'. All the rules of one key share the hash tag: on Redis Cluster
// their limiters share a slot and one script call takes from all. prefix
// must hold no '{' (the first '{' starts the tag).
func RuleName(prefix, key, rule string) string {
	return prefix + "{" + Name("", key) + "}:" + rule
}

// Token reports whether s is 1 to max letters, digits, '-', '_' or '.'.
func Token(s string, max int) bool {
	if len(s) < 1 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
