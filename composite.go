package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxParts is the most limiters one Composite holds: it bounds the work of
// one script call.
const MaxParts = 16

// Composite is several limiters of one Client used as one: each
// acquisition takes n permits from every part or from none, atomically, in
// one script call, so that a refusal by one part never costs the others
// permits ("10 per second and 1,000 per hour"). Each part stays an
// ordinary limiter, in any mode, shared with Java's RRateLimiter and with
// Client.Limiter: both see every permit the composite takes, and the
// composite sees theirs. Make one with Client.All. It holds no state of
// its own beyond key names and is safe for concurrent use.
type Composite struct {
	c     *Client
	name  string   // the parts' names joined by "+" (Decision.Limiter)
	names []string // the parts' names (clock skew weighs their intervals)
	parts []*Limiter
	keys  []string // K1..K5 of every part, part after part
	lane  string
	err   error
}

// All returns the composite of the limiters called names, in that order.
// It sends nothing to Redis. Every part must be configured (from Go or
// Java) before permits can be taken. An invalid set of names makes every
// call of the composite fail: none or more than MaxParts names, a name
// given twice (after name mapping) or invalid on its own (see
// Client.Limiter) give ErrInvalidArgument; on a cluster client, names
// whose keys do not share one hash slot give ErrCrossSlot (name the parts
// with one hash tag: "user:{42}:sec", "user:{42}:hour").
func (c *Client) All(names ...string) *Composite {
	a := &Composite{c: c, name: strings.Join(names, "+"), names: slices.Clone(names), err: c.err}
	if len(names) == 0 || len(names) > MaxParts {
		a.err = errors.Join(a.err, invalid("%d limiters in a composite, not in [1, %d]", len(names), MaxParts))
		return a
	}
	seen := make(map[string]string, len(names))
	lane := make([]string, 0, len(names))
	var first *Limiter // the first valid part, for the slot check
	for _, name := range names {
		r := c.Limiter(name)
		a.parts = append(a.parts, r)
		if r.err != nil {
			a.err = errors.Join(a.err, r.wrap(r.err))
			continue
		}
		if other, dup := seen[r.keys.Config]; dup {
			a.err = errors.Join(a.err, invalid("limiters %q and %q are the same limiter", other, name))
			continue
		}
		seen[r.keys.Config] = name
		if first == nil {
			first = r
		}
		if c.cluster && keySlot(r.keys.Config) != keySlot(first.keys.Config) ||
			c.ring && keyTag(r.keys.Config) != keyTag(first.keys.Config) {
			a.err = errors.Join(a.err, fmt.Errorf("%w: limiters %q and %q", ErrCrossSlot, first.name, name))
		}
		a.keys = append(a.keys, r.keyList...)
		lane = append(lane, strconv.Quote(r.keys.Config))
	}
	// Composites of the same set share a lane whatever the order of names.
	slices.Sort(lane)
	a.lane = "*" + strings.Join(lane, ",")
	return a
}

// Names returns the names the composite was made with, in order.
func (a *Composite) Names() []string {
	out := make([]string, len(a.parts))
	for i, r := range a.parts {
		out[i] = r.name
	}
	return out
}

// Parts returns the composite's limiters, in order, to configure or
// inspect them one by one.
func (a *Composite) Parts() []*Limiter { return slices.Clone(a.parts) }

// Allow tries once to take n permits from every part without waiting. On
// a grant, Remaining is the fewest permits left among the parts, and Limit,
// Interval and ResetAfter are those of the part with that fewest. On a
// refusal nothing is taken from any part; RetryAfter is the time until
// every part can grant n (the longest of the parts' waits, a lower bound
// as for a single limiter), Remaining the fewest permits available among
// the parts, and Limit, Interval and ResetAfter those of the part that
// must wait longest. n must be from 1 to MaxPermits. It fails with
// ErrNotInitialized when a part is not configured and with
// ErrPermitsExceedRate when n exceeds a part's rate; both errors name that
// part. Other errors are those of Limiter.Allow.
func (a *Composite) Allow(ctx context.Context, n int64) (Result, error) {
	return try(ctx, a, n, true)
}

// TryAcquire takes n permits from every part if all have them now, and
// reports whether it did. It never waits. Errors are those of Allow.
func (a *Composite) TryAcquire(ctx context.Context, n int64) (bool, error) {
	res, err := try(ctx, a, n, false)
	return res.Granted, err
}

// TryAcquireTimeout takes n permits from every part, waiting up to timeout
// until all have them. It returns true once granted and false, at once, as
// soon as the wait hint shows that the permits cannot come within timeout.
// Context deadlines and errors are handled as by Limiter.TryAcquireTimeout.
func (a *Composite) TryAcquireTimeout(ctx context.Context, n int64, timeout time.Duration) (bool, error) {
	if timeout < 0 {
		return false, a.decided(ctx, Decision{Limiter: a.name, Op: OpTryAcquireTimeout, Permits: n},
			a.check(invalid("negative timeout %v", timeout)))
	}
	return wait(ctx, a, n, time.Now().Add(timeout), OpTryAcquireTimeout)
}

// Acquire takes n permits from every part, waiting as long as it takes:
// one wait for the whole set, on the hint until every part can grant.
// Context deadlines and errors are handled as by Limiter.Acquire.
func (a *Composite) Acquire(ctx context.Context, n int64) error {
	_, err := wait(ctx, a, n, time.Time{}, OpAcquire)
	return err
}

func (a *Composite) client() *Client { return a.c }
func (a *Composite) label() string   { return a.name }

func (a *Composite) check(err error) error {
	if a.err != nil {
		return a.err
	}
	return err
}

// decided reports d, ended with err, to the Client's hooks (one Decision
// per composite acquisition, Limiter being the names joined by "+") and
// returns err. An error that names no part (Redis's, the context's, bad
// arguments) names the composite as Decision.Limiter does.
func (a *Composite) decided(ctx context.Context, d Decision, err error) error {
	var le *LimiterError
	if err != nil && !errors.As(err, &le) {
		err = &LimiterError{Limiter: a.name, Err: err}
	}
	d.Err = err
	a.c.decided(ctx, d, a.names...)
	return err
}

func (a *Composite) laneKey() string { return a.lane }

// giveBack releases n permits to every part.
func (a *Composite) giveBack(ctx context.Context, n int64) error {
	var err error
	for _, r := range a.parts {
		err = errors.Join(err, r.Release(ctx, n))
	}
	return err
}
