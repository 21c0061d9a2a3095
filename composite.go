package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/internal/script"
	"github.com/goredisson/ratelimiter/wire"
)

// MaxParts is the most limiters one Composite holds: it bounds the work of
// one script call.
const MaxParts = 16

// Composite is several limiters of one Client used as one: each
// acquisition takes n permits (with Weighted, n × each part's weight) from
// every part or from none, atomically, in one script call, so that a
// refusal by one part never costs the others permits ("10 per second and
// 1,000 per hour"). Each part stays an
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

	// What a call takes from each part (Weighted): the parts with a
	// weight (indices into parts, in order), their keys and weights as
	// the script gets them. Without Weighted, every part with weight 1.
	weights []int64 // nil: 1 from every part
	// sp holds the parts with a weight (indices into parts, in order),
	// their keys and weights as the script gets them, and whether a
	// weight is not 1 (Result's Remaining is then the binding part's, not
	// the fewest among parts that count different things).
	sp    script.Parts
	maxW  int64
	order []int // parts' indices sorted by config key (the lane's order)
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
	a := &Composite{c: c, name: strings.Join(names, "+"), names: slices.Clone(names), err: c.err, maxW: 1}
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
		if c.cluster && wire.Slot(r.keys.Config) != wire.Slot(first.keys.Config) ||
			c.ring && wire.HashTag(r.keys.Config) != wire.HashTag(first.keys.Config) {
			a.err = errors.Join(a.err, fmt.Errorf("%w: limiters %q and %q", ErrCrossSlot, first.name, name))
		}
		a.keys = append(a.keys, r.sk.All...)
		lane = append(lane, strconv.Quote(r.keys.Config))
	}
	// Composites of the same set share a lane whatever the order of names.
	if a.err == nil {
		a.order = make([]int, len(lane))
		for i := range a.order {
			a.order[i] = i
		}
		slices.SortFunc(a.order, func(i, j int) int { return strings.Compare(lane[i], lane[j]) })
	}
	slices.Sort(lane)
	a.lane = "*" + strings.Join(lane, ",")
	for i := range a.parts {
		a.sp.On = append(a.sp.On, i)
		a.sp.Weights = append(a.sp.Weights, int64(1))
	}
	a.sp.Keys, a.sp.N = a.keys, len(a.parts)
	return a
}

// Weighted returns a view of a whose calls take n × weights[i] permits
// from part i (the i-th name given to Client.All) for n asked, all or none, in one script call
// as Allow does, and whose Release gives back n × weights[i] to each
// part: "1 request and 750 tokens" from a requests-per-minute and a
// tokens-per-minute limiter is c.All("rpm", "tpm").Weighted(1, 750) with
// n = 1. A part of weight 0 is not touched: the call neither reads nor
// writes it, and it need not be configured. The view replaces any weights
// a had; a itself is unchanged. Make a view per call when weights vary:
// it sends nothing to Redis and holds no state of its own.
//
// Allow's Result describes the binding part as for a Composite, except
// that on a grant the binding part is the one that could grant the fewest
// more calls of these weights (its permits left divided by its weight,
// rounded down; with all weights 1, the part with the fewest left), and
// that Remaining is that part's permits left (on a refusal, those of the
// part that waits longest): the parts count different things. Result.Parts
// says, per part, whether it had its share and, when not, how long until
// it can grant it.
//
// A view made with invalid weights makes every call of it fail, before
// anything is sent to Redis, with an error matching ErrInvalidWeights
// (and ErrInvalidArgument): a number of weights other than the parts', a
// negative weight, every weight 0, or a weight above MaxPermits. Calls of
// the view also fail that way when n × a weight exceeds MaxPermits; a
// request for more than a part's rate (n × its weight) fails with
// ErrPermitsExceedRate naming that part, as in Allow, and takes nothing.
//
// Views with equal weights on the same set of parts share the Client's
// combining (docs/combining.md) and local refusals; views with other
// weights have their own, so that one's refusal never refuses another.
func (a *Composite) Weighted(weights ...int64) *Composite {
	b := *a
	b.weights = slices.Clone(weights)
	b.sp.On, b.sp.Keys, b.sp.Weights, b.maxW = nil, nil, nil, 1
	if len(weights) != len(a.parts) {
		b.err = errors.Join(b.err, fmt.Errorf("%w: %d weights for %d parts", ErrInvalidWeights, len(weights), len(a.parts)))
		return &b
	}
	var bad error
	for i, w := range weights {
		switch {
		case w < 0 || w > MaxPermits:
			bad = errors.Join(bad, fmt.Errorf("%w: weight %d of part %q out of range [0, %d]", ErrInvalidWeights, w, a.names[i], int64(MaxPermits)))
		case w > 0:
			b.sp.On = append(b.sp.On, i)
			b.sp.Weights = append(b.sp.Weights, w)
			b.maxW = max(b.maxW, w)
			if a.err == nil {
				b.sp.Keys = append(b.sp.Keys, a.parts[i].sk.All...)
			}
		}
	}
	if bad == nil && len(b.sp.On) == 0 {
		bad = fmt.Errorf("%w: every weight is 0", ErrInvalidWeights)
	}
	if bad != nil {
		b.err = errors.Join(b.err, bad)
		return &b
	}
	b.sp.Weighted = slices.ContainsFunc(weights, func(w int64) bool { return w != 1 })
	if b.err == nil && b.sp.Weighted {
		// The lane names the weights too: requests of one lane are decided
		// with one set of weights (the first request's target).
		ws := make([]string, len(b.order))
		for i, j := range b.order {
			ws[i] = strconv.FormatInt(weights[j], 10)
		}
		b.lane = a.lane + "#" + strings.Join(ws, ",")
	}
	return &b
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

// LaneKey names the composite's lane: composites of one set of parts
// share it, whatever the order of names.
func (t *compositeTarget) LaneKey() string { return t.lane }

// MaxWeight is the largest weight: n × it permits go into one record.
func (t *compositeTarget) MaxWeight() int64 { return t.maxW }

// maxWeight is the largest weight: n × maxWeight permits go into one record.
func (a *Composite) maxWeight() int64 { return a.maxW }

// GiveBack runs internal/script/lua/release_all.lua: n permits (times the weights) back
// to the parts, in one script call.
func (t *compositeTarget) GiveBack(ctx context.Context, n int64, _ []byte) error {
	a := (*Composite)(t)
	return a.named(a.partErr(a.c.conn.ReleaseAll(ctx, &a.sp, n)))
}

// Decide runs the composite's acquire script (internal/script/lua/acquire_all.lua) once
// for the permits ns, in order, and returns one verdict for each; errors
// of one part name it.
func (t *compositeTarget) Decide(ctx context.Context, f engine.Form, ns []int64) engine.Reply {
	a := (*Composite)(t)
	b := a.c.conn.AcquireAll(ctx, &a.sp, f, ns)
	b.Err = a.partErr(b.Err)
	for i := range b.Verdicts {
		b.Verdicts[i].Err = a.partErr(b.Verdicts[i].Err)
	}
	return b
}

// partErr names the part in a *script.PartError; other errors stay.
func (a *Composite) partErr(err error) error {
	var pe *script.PartError
	if err != nil && errors.As(err, &pe) {
		return a.parts[pe.Part].wrap(pe.Err)
	}
	return err
}

// Release gives back n permits to every part now, or with Weighted n ×
// its weight to each part of nonzero weight, in one script call: every
// part gives back or, on an error, none does (each part's configuration
// and state are checked before the first write). Each part gives back as
// Limiter.Release does: up to its rate, taking the permits out of this
// Client's own records first, then Redisson's, then other Go Clients',
// oldest first (among the 256 newest), so that they do not come back a
// second time when those records expire. It is meant for permits this
// composite took (the unused part of an estimate: take Weighted(1, 750),
// use 300 tokens, Release Weighted(0, 450) with n = 1).
//
// A part gives back less than asked, without an error, when its records
// in the window hold fewer permits: records that already left the window
// (their interval ended) gave their permits back when they expired, so
// those permits are not given back again; likewise when the part is at
// its rate. n = 0 does nothing and sends nothing. It fails with
// ErrInvalidArgument for n < 0 or n × a weight above MaxPermits, with
// the errors of Weighted and All for an invalid composite, and with
// ErrNotInitialized, naming the part, when a part to release is not
// configured. As for Limiter.Release, a Java Redisson that releases on
// the same limiters does not shrink records (docs/protocol.md).
func (a *Composite) Release(ctx context.Context, n int64) error {
	if err := a.check(checkRelease(n, a.maxW)); err != nil || n == 0 {
		a.c.eng.Forget() // local refusals may no longer hold
		return a.named(err)
	}
	return a.c.eng.Release(ctx, a.target(), n)
}

// named names the composite in an error that names no part, as decided
// does.
func (a *Composite) named(err error) error {
	var le *LimiterError
	if err != nil && !errors.As(err, &le) {
		err = &LimiterError{Limiter: a.name, Err: err}
	}
	return err
}

// checkRelease returns why n permits, times the weight w, cannot be
// released, or nil.
func checkRelease(n, w int64) error {
	if n < 0 || n > MaxPermits {
		return invalid("permits %d out of range [0, %d]", n, int64(MaxPermits))
	}
	if n == 0 {
		return nil
	}
	return checkPermits(n, max(w, 1))
}
