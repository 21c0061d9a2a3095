package ratelimiter

import (
	"errors"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/wire"
)

// Every option of NewClient, in one place. Each states its default.

// Option configures a Client.
type Option func(*Client)

// WithClientID sets the client id used for PER_CLIENT keys instead of a new
// random UUID. Give the same id to a restarted process that must keep its
// PER_CLIENT budget; it must not be empty.
//
// default: a new random UUID per Client.
func WithClientID(id string) Option {
	return func(c *Client) {
		if id == "" {
			c.err = errors.Join(c.err, invalid("empty client id"))
		}
		c.id = id
	}
}

// WithNameMapper maps every limiter name before the keys are derived from
// it, like Redisson's NameMapper (for example to add a prefix). Java and
// Go must use the same mapping to share limiters. A nil mapper is an error.
//
// default: none: names are used as given.
func WithNameMapper(m func(string) string) Option {
	return func(c *Client) {
		if m == nil {
			c.err = errors.Join(c.err, invalid("nil name mapper"))
		}
		c.mapName = m
	}
}

// WithMemberFormat sets the permit record format (the byte layout of the
// sorted-set members, wire.Format) this client writes. This library reads
// the count from a record's last four bytes, which works for every
// generation, but Redisson unpacks a record with its own format: an older
// Redisson takes the wrong bytes of a newer record as the count. Write the
// format of the oldest Redisson in the fleet that shares the limiter:
// wire.Bc0I for Redisson 3.17.0 and later, wire.Lc0I for 3.16.4 to 3.16.8,
// wire.FI for 3.16.3 and earlier. An unknown format makes every call fail
// with ErrInvalidArgument.
//
// default: wire.Bc0I.
func WithMemberFormat(f wire.Format) Option {
	return func(c *Client) {
		if !f.Valid() {
			c.err = errors.Join(c.err, invalid("unknown member format %d", int(f)))
		}
		c.format = f
	}
}

// WithClock sets the Client's clock; the default is time.Now. With
// WithServerClock(false) its reading, in epoch milliseconds, stamps
// permit records and decides which have expired, as Redisson trusts each
// client's clock (the clocks of a fleet must then agree); with the
// server's clock (the default) it times only local refusals and the
// clock check. Waiting in Acquire always uses real time. now must be
// safe for concurrent use: script calls read it from the goroutines that
// run them, and the clock check (WithClockCheck) from its own.
//
// default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now == nil {
			c.err = errors.Join(c.err, invalid("nil clock"))
		}
		c.clock = now
	}
}

// WithServerClock chooses the clock that stamps this Client's permit
// records and decides which have expired. On (the default), the scripts
// read the server's clock (Redis TIME) when they run: a stall between the
// call and the script cannot make a stamp stale, and the clocks of the Go
// fleet need not agree. Off, they use the Client's clock (WithClock), as
// Redisson does; a grant is then never stamped before the newest record
// of the window (unless that one is more than an interval ahead), so
// that a call held by a stall does not free its permits before those of
// calls that ran first, at one more Redis read per grant. Redisson stamps
// with its own clock whatever this option says: docs/differences.md
// states the bound its offset sets.
//
// default: on: the server's clock.
func WithServerClock(on bool) Option {
	return func(c *Client) { c.clientClock = !on }
}

// WithClockCheck sets how often the Client measures its clock against
// Redis in the background after its first acquisition (the ClockSkew
// hook reports it); a negative value turns the automatic
// measurement off (MeasureClock still measures).
//
// default: 0, every 5 minutes.
func WithClockCheck(every time.Duration) Option {
	return func(c *Client) { c.skew.every = every }
}

// defaultMaxBatch is WithMaxBatch's default.
const defaultMaxBatch = 128

// WithMaxBatch sets the most acquisitions of one limiter that one script
// call decides (combining, docs/combining.md). Concurrent acquisitions of
// a limiter through one Client share script calls: one that finds no call
// in flight is sent at once; those that arrive meanwhile are sent
// together in the next call, in arrival order, and blocked callers wait in
// one queue per limiter. Combining cuts Redis work and memory per grant
// under load (one permit record per call instead of one per acquisition);
// a larger batch makes a longer script call, which delays every other
// command on that Redis for its duration. 1 turns combining off: every
// acquisition is its own script call and every blocked caller sleeps on
// its own timer, as Redisson does. 0 means the default, 128; n must be
// from 0 to 4096.
//
// default: 128.
func WithMaxBatch(n int) Option {
	return func(c *Client) {
		switch {
		case n < 0 || n > 4096:
			c.err = errors.Join(c.err, invalid("max batch %d out of range [0, 4096]", n))
		case n == 0:
			c.maxBatch = defaultMaxBatch
		default:
			c.maxBatch = n
		}
	}
}

// WithFairness turns fair wakes on or off (default on). When on, blocked
// callers (Acquire, TryAcquireTimeout) of a limiter that other writers
// (Redisson, or Go clients of versions that do not mark their records)
// also use wake at a random delay after their hint, as docs/fairness.md
// describes, so that Java waiters keep their share; on a limiter only
// this library writes, waiters wake together on their hint, and once per
// probe window (every period of the wall clock that holds 150 permits of
// the limiter's rate, in whole intervals, at least a second: 3 s at 50
// per second; WithProbeWindows sets the 150) their calls leave a permit
// (WithProbeHold: more) free for 110 ms, which holds back the callers that
// call then (every permit for 50 ms, in the window where each minute
// starts).
// Off: waiters always wake together on their hint, and no census is
// read. Composites' waiters always wake on their hint. Fair wakes need
// the waiter queue: with WithMaxBatch(1) they are off.
//
// default: on.
func WithFairness(on bool) Option {
	return func(c *Client) { c.unfair = !on }
}

// WithForeignWaiters states how many callers outside this library (the
// threads of a Java service in acquire, say) wait on each limiter this
// Client shares with them, so that fair wakes aim at an equal share per
// waiter instead of an even split between the sides: the Client steers
// its own blocked callers' permits per caller toward the others' permits
// per stated waiter. A Client cannot count them itself: a JVM's threads
// retry together, and a window holds nothing that tells one thread from
// eight (docs/fairness.md). n must be from 0 to 65536; 0 (the default)
// aims at an even split between this library's permits and the others'.
// It has no effect with WithFairness(false) or WithMaxBatch(1), and none
// on composites, whose waiters wake on their hint. An n out of range makes
// every call fail with ErrInvalidArgument.
//
// default: 0: an even split.
func WithForeignWaiters(n int) Option {
	return func(c *Client) {
		if n < 0 || n > engine.MaxForeignWaiters {
			c.err = errors.Join(c.err, invalid("foreign waiters %d out of range [0, %d]", n, engine.MaxForeignWaiters))
			return
		}
		c.foreign = n
	}
}

// WithProbeWindows sets how often probe windows come on a limiter that
// only this library writes (WithFairness): at most once per permits
// permits of the limiter's rate, in whole intervals, and at least a second
// apart. Since the probe record (docs/fairness.md, "The rule", step 4),
// windows matter only with WithProbeHold(n) for n > 1: a window then
// leaves n permits free for 110 ms, so that a Redisson service asking n a
// call that starts while Go callers keep the limiter busy is granted
// within a probe period and its retry tick (at most 100 ms) of its first
// refused call. With the default hold of one, the probe record lets a
// Redisson service asking one in (within an interval and a tick at 50 per
// second, within a probe period where it is sparse), and windows hold
// nothing but the first 50 ms of the window where a minute starts (every
// permit free, for calls asking more). Each window with a hold costs the
// Go callers about a grant a permit held (it idles until the next
// expiry): 150 is a window every 3 s at 50 per second; 1 puts one in every
// interval, or every second when the interval is shorter. Every Client of
// a limiter must have the same setting: the windows hold permits free only
// if all of the limiter's Clients hold them at once. permits must be from
// 1 to 2^20; otherwise every call fails with ErrInvalidArgument.
//
// default: 150.
func WithProbeWindows(permits int) Option {
	return probeOption("probe windows every", permits, func(c *Client) *int64 { return &c.probeN })
}

// WithProbeHold sets how many permits a probe window (WithProbeWindows)
// leaves free for 110 ms (default 1), for a fleet that shares its
// limiters with Redisson services asking that many permits a call: the
// probe record frees one, which a Redisson call for 5 cannot take, so
// such a service that starts while Go callers keep the limiter busy
// otherwise waits for the window where a minute starts, which frees every
// permit for 50 ms. With n > 1 a Client leaves the joins to its windows
// and writes no probe record. Each permit held idles until the next
// expiry, so each should cost the Go callers about a grant a window
// (measured for one permit, before the probe record). Every Client of a
// limiter must have the same setting. permits must be from 1 to 2^20;
// otherwise every call fails with ErrInvalidArgument.
//
// default: 1.
func WithProbeHold(permits int) Option {
	return probeOption("probe hold of", permits, func(c *Client) *int64 { return &c.probeHold })
}

// maxProbePermits bounds WithProbeWindows (windows a day apart at 12 per
// second, far past what anyone would join by) and WithProbeHold.
const maxProbePermits = 1 << 20

// probeOption sets the field that field returns to permits, or fails the
// Client with ErrInvalidArgument (what names the option) when permits is
// not from 1 to maxProbePermits.
func probeOption(what string, permits int, field func(*Client) *int64) Option {
	return func(c *Client) {
		if permits < 1 || permits > maxProbePermits {
			c.err = errors.Join(c.err, invalid("%s %d permits out of range [1, %d]", what, permits, maxProbePermits))
			return
		}
		*field(c) = int64(permits)
	}
}

// WithLocalRefusals turns local refusals on (the default) or off. When
// on, after Redis refuses a call of a limiter with a wait hint, this
// Client refuses the non-blocking calls (Allow, TryAcquire) of that
// limiter that ask for as many permits until the hint, counted from when
// the refused call was sent, has passed, without a Redis call; the
// Decision of such a call has Local set, and its Result is the refusal's
// with RetryAfter and ResetAfter counted down. This Client's own Release,
// SetRate, UpdateRate, TrySetRate and Delete end them at once; other
// clients' releases and rate changes are seen when the hint ends.
//
// default: on.
func WithLocalRefusals(on bool) Option {
	return func(c *Client) { c.noLocal = !on }
}

// WithLeases turns leased permits on, configured by o (see LeaseOptions;
// the zero value takes the defaults). A Client with leases hands out
// permits of a limiter that Redis granted to it in one block, without a
// Redis call per acquisition, while its callers ask that limiter steadily
// and the limiter is far from its rate; Decision.Leased marks such grants
// and Hooks.Lease reports each lease when it ends. Off by default.
// Composites never lease. Leases need combining and the server's clock:
// with WithMaxBatch(1) or WithServerClock(false), as with an option out of
// range, Client.Err and every call of the Client return an error matching
// ErrInvalidArgument, and nothing is sent to Redis. Call Client.Close
// before the process exits to give back the unused permits at once
// (otherwise they come back when their record expires, one interval after
// the lease).
//
// default: off.
func WithLeases(o LeaseOptions) Option {
	return func(c *Client) {
		o, err := o.withDefaults()
		if err != nil {
			c.err = errors.Join(c.err, err)
			return
		}
		eo := engine.LeaseOptions(o)
		c.leaseOpts = &eo
	}
}

// WithReplicaAck makes every acquisition wait until at least replicas
// replicas of the limiter's master have acknowledged it (Redis's WAIT, sent
// on the same connection right after the script, in the same round trip)
// before it reports success; it waits at most timeout, and never past the
// context's deadline. Without it an acquisition is reported as soon as the
// master has applied it, and Redis replicates asynchronously: a master
// that crashes may take the last grants with it, and the replica that
// takes over grants those permits again.
//
// When fewer replicas acknowledge in time, the acquisition fails with a
// error matching ErrReplicaAck: see there for why the
// permits stay taken and how to accept such a grant anyway. Only
// acquisitions wait; SetRate, Release and the rest do not. Denied
// acquisitions are not affected, except that the WAIT they also send
// costs up to timeout while replicas are missing.
//
// Redis checks WAIT timeouts on its server tick, so a WAIT can end up to
// 1/hz (100 ms at the default hz 10) after its timeout; for calls to end by
// their context's deadline even then, make the go-redis client with
// ContextTimeoutEnabled.
//
// replicas must be at least 1 and timeout at least 1 ms. With Redis
// Cluster, each master must have that many replicas (a shard that lost its
// only replica fails every acquisition until a replica is back); with
// Sentinel, count the replicas of the master. The option works with
// *redis.Client, a failover client and *redis.ClusterClient, not with
// redis.Ring.
//
// default: off: grants are reported when the master applied them.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *Client) {
		if replicas < 1 {
			c.err = errors.Join(c.err, invalid("replica ack count %d must be at least 1", replicas))
			return
		}
		if timeout < time.Millisecond {
			c.err = errors.Join(c.err, invalid("replica ack timeout %v must be at least 1ms", timeout))
			return
		}
		c.replicas, c.ackTimeout = replicas, timeout
	}
}

// WithOutageFallback turns on the degraded mode configured by o (see
// OutageFallback): while Redis is unreachable, each Limiter's
// acquisitions (Allow, TryAcquire, TryAcquireTimeout, Acquire) are
// decided by a local window in this process at o's share of the
// limiter's rate, marked Degraded (Decision, Result), and they go to
// Redis again as soon as it answers.
//
// An outage begins for the whole Client (Hooks.Outage) with the first
// script call of an acquisition that either fails at the connection level
// (a refused or failed dial, a connection closed or reset by the other
// end, a network timeout, "all sentinels unreachable", "all ring shards
// are down") or has no answer by its own deadline (the caller's context
// deadline, or TryAcquireTimeout's timeout plus 25 ms), also when its
// callers have already gone. Nothing else begins one: no reply of Redis
// (a script error, ErrNotInitialized, an ACL denial, OOM, READONLY,
// LOADING), no caller's cancellation, no call that ended unsent in the
// Client's queue, no closed go-redis client (redis.ErrClosed), and no
// exhausted or timed-out go-redis pool (redis.ErrPoolExhausted,
// redis.ErrPoolTimeout: this process's own saturation). A call stalled
// past its deadline on a loaded machine therefore begins an outage while
// Redis is healthy; the next probe ends it. The call that began the
// outage and every later one are decided at once by the local windows,
// without waiting on Redis, and one background goroutine sends PING every
// o.Probe until Redis answers, which ends the outage (as does a PING that
// finds the go-redis client closed). Blocking calls wait on the local
// window's hint, never past their timeout or context deadline, and go
// back to Redis when the outage ends.
//
// A limiter's rate and interval are those of the last acquisition's reply
// that carried them (Allow's and blocked callers' always do; TryAcquire
// asks for them when they are unknown or more than a second old). An
// acquisition of a limiter whose rate the Client has not seen fails
// during an outage as it does without this option, as do composites'
// acquisitions and every other call (Release, SetRate, AvailablePermits,
// ...). A live lease (WithLeases) is not drawn from during an outage.
//
// Each limiter's local window is kept from one outage to the next until
// its grants are an interval old (a new rate or interval starts a new
// one), so this Client grants locally at most floor(share × rate) permits
// in any window of one interval, however many outages that window holds.
// The local grants are not written to Redis, which does not count them:
// in any window of one interval a limiter grants at most what Redis
// granted in it (at most the rate) plus the local limits of the processes
// that decided locally in it (the rate again, with Replicas equal to the
// processes), and only the local limits while Redis grants nothing.
// docs/operations.md ("Redis outages") describes the mode.
//
// default: off: acquisitions fail while Redis is unreachable.
func WithOutageFallback(o OutageFallback) Option {
	return func(c *Client) {
		o, err := o.resolve()
		if err != nil {
			c.err = errors.Join(c.err, err)
			return
		}
		c.fallback = &o
	}
}

// WithHooks installs h on the Client. A later WithHooks replaces an
// earlier one. The default is no hooks, which costs nothing.
//
// default: none.
func WithHooks(h Hooks) Option {
	return func(c *Client) { c.hooks = h }
}
