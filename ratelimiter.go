package ratelimiter

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// Client holds what all limiters of one process share: the Redis client,
// this client's id (PER_CLIENT budgets are kept per id) and the options.
// It is safe for concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	id      string
	tag     wire.Tag // written in every record (wire.New)
	mapName func(string) string
	format  MemberFormat
	clock   func() time.Time
	// clientClock: stamp with clock, not the server's (WithServerClock)
	clientClock bool
	cluster     bool
	ring        bool          // rdb is a *redis.Ring: keys are sharded by their hash tag
	ack         replicaAck    // WithReplicaAck; zero: off
	refresh     refresher     // cluster slot map reloads (redis_topology.go)
	hooks       Hooks         // WithHooks
	skew        skewState     // clock measurements against Redis TIME (clock_skew.go)
	perm        permState     // the user's permissions (redis_permissions.go)
	evict       evictionState // the server's eviction policy (redis_eviction.go)

	maxBatch  int          // WithMaxBatch; 1: no combining
	unfair    bool         // WithFairness(false) (fairness.go)
	probe     probeClock   // probe windows (fairness_probe.go); nil: the wall clock's
	foreign   int          // WithForeignWaiters (fairness.go); 0: an even split
	noLocal   bool         // WithLocalRefusals(false) (combine_localrefusal.go)
	refusals  refusals     // local refusals by lane key
	perClient perClientSet // limiters found PER_CLIENT (clock.go)
	lanes     lanes        // combining state per limiter in use (combine_lane.go)
	leases    *leasing     // WithLeases (combine_lease.go); nil: off
	err       error
}

// Option configures a Client.
type Option func(*Client)

// WithClientID sets the client id used for PER_CLIENT keys instead of a new
// random UUID. Give the same id to a restarted process that must keep its
// PER_CLIENT budget; it must not be empty.
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
func WithNameMapper(m func(string) string) Option {
	return func(c *Client) {
		if m == nil {
			c.err = errors.Join(c.err, invalid("nil name mapper"))
		}
		c.mapName = m
	}
}

// WithMemberFormat sets the permit record format this client writes; the
// default is FormatBc0I (Redisson 3.21.0 and later). Records of every
// format are read whatever this is set to.
func WithMemberFormat(f MemberFormat) Option {
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
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now == nil {
			c.err = errors.Join(c.err, invalid("nil clock"))
		}
		c.clock = now
	}
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

// NewClient returns a Client on rdb, which may be a *redis.Client,
// *redis.ClusterClient or a failover client. Invalid options or a nil rdb
// do not panic: every call then fails with an error matching
// ErrInvalidArgument.
func NewClient(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, format: FormatBc0I, clock: time.Now, maxBatch: defaultMaxBatch}
	binary.LittleEndian.PutUint32(c.tag[:], rand.Uint32())
	for _, o := range opts {
		if o == nil {
			c.err = errors.Join(c.err, invalid("nil option"))
			continue
		}
		o(c)
	}
	c.checkLeases()
	if c.id == "" && c.err == nil {
		c.id = uuid.NewString()
	}
	if rdb == nil {
		c.err = errors.Join(c.err, invalid("nil redis client"))
	}
	_, c.cluster = rdb.(*redis.ClusterClient)
	_, c.ring = rdb.(*redis.Ring)
	return c
}

// Err returns the error that every call of the Client fails with because
// it was made with invalid options or a nil Redis client (it matches
// ErrInvalidArgument), or nil when the Client is usable. It sends nothing
// to Redis: middlewares check it when they are built.
func (c *Client) Err() error { return c.err }

// ID returns the client id that names this client's PER_CLIENT keys.
func (c *Client) ID() string { return c.id }

// RecordTag returns the 8 hex digits that this Client writes into each of
// its permit records in FormatBc0I and FormatLc0I (Member.GoTag reads them
// back), random per Client. The CLI's inspect and watch show a limiter's
// window by this tag, so that an operator can tell which Client holds
// what; log it at start to map tags to processes.
func (c *Client) RecordTag() string { return hex.EncodeToString(c.tag[:]) }

// Redis returns the Redis client the Client was made with, for tools that
// read a limiter's keys directly.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Limiter returns the limiter called name. It sends nothing to Redis;
// a limiter must be configured (TrySetRate or SetRate, from Go or Java)
// before permits can be taken. An invalid name (empty, or on a cluster
// client one whose keys would not share a slot, or on a go-redis Ring one
// whose keys would not share a hash tag, and so a shard) makes every call
// of the limiter fail with ErrInvalidArgument or ErrCrossSlot.
func (c *Client) Limiter(name string) *Limiter {
	r := &Limiter{c: c, name: name, err: c.err}
	if name == "" {
		r.err = errors.Join(r.err, invalid("empty limiter name"))
		return r
	}
	raw := name
	if c.mapName != nil {
		raw = c.mapName(name)
		if raw == "" {
			r.err = errors.Join(r.err, invalid("name mapper maps %q to the empty string", name))
			return r
		}
	}
	r.keys = wire.KeysFor(raw, c.id)
	r.keyList = r.keys.All()
	r.overall = []string{r.keyList[0], r.keyList[1], r.keyList[3]}
	if c.cluster && !r.keys.SameSlot() || c.ring && !r.keys.SameTag() {
		r.err = errors.Join(r.err, ErrCrossSlot)
	}
	return r
}

// Limiter is one named limiter, seen through one Client. It holds no
// state of its own beyond its key names and is safe for concurrent use.
type Limiter struct {
	c       *Client
	name    string
	keys    Keys
	keyList []string // keys in the scripts' order K1..K5, made once
	overall []string // K1, K2 and K4: what an OVERALL acquire needs
	err     error
}

// Name returns the name the limiter was made with, before name mapping.
func (r *Limiter) Name() string { return r.name }

// Keys returns the Redis keys of the limiter, for tools that inspect it.
func (r *Limiter) Keys() Keys { return r.keys }
