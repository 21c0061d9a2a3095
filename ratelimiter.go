package ratelimiter

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/internal/script"
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
	format  wire.Format
	clock   func() time.Time
	// clientClock: stamp with clock, not the server's (WithServerClock)
	clientClock bool
	cluster     bool
	ring        bool            // rdb is a *redis.Ring: keys are sharded by their hash tag
	hooks       Hooks           // WithHooks
	fallback    *OutageFallback // WithOutageFallback; nil: off
	out         *outage         // the degraded mode (outage.go); nil: off
	skew        skewState       // clock measurements against Redis TIME (clock_skew.go)
	// WithReplicaAck's replicas (0: off) and timeout, for script.New.
	replicas   int
	ackTimeout time.Duration

	// The engine's options (internal/engine), set by the options and
	// handed to engine.New once they all ran.
	maxBatch  int                  // WithMaxBatch; 1: no combining
	unfair    bool                 // WithFairness(false)
	foreign   int                  // WithForeignWaiters; 0: an even split
	probeN    int64                // WithProbeWindows; 0: the engine's 150
	probeHold int64                // WithProbeHold; 0: one
	noLocal   bool                 // WithLocalRefusals(false)
	leaseOpts *engine.LeaseOptions // WithLeases; nil: off
	probe     engine.ProbeClock    // tests' probe windows; nil: the wall clock's

	eng  *engine.Engine // lanes, waiters, local refusals, fairness, leases
	conn *script.Conn   // the scripts and the Redis plumbing around them
	err  error
}

// NewClient returns a Client on rdb, which may be a *redis.Client,
// *redis.ClusterClient or a failover client. Invalid options or a nil rdb
// do not panic: every call then fails with an error matching
// ErrInvalidArgument.
func NewClient(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, format: wire.Bc0I, clock: time.Now, maxBatch: defaultMaxBatch}
	binary.LittleEndian.PutUint32(c.tag[:], rand.Uint32())
	for _, o := range opts {
		if o == nil {
			c.err = errors.Join(c.err, invalid("nil option"))
			continue
		}
		o(c)
	}
	c.checkLeases()
	c.conn = script.New(rdb, script.Options{Format: c.format, Tag: c.tag, Clock: c.clock,
		ClientClock: c.clientClock, Replicas: c.replicas, AckTimeout: c.ackTimeout})
	c.eng = engine.New(engine.Options{
		MaxBatch: c.maxBatch, Unfair: c.unfair, Foreign: c.foreign, NoLocal: c.noLocal,
		Clock: c.clock, Probe: c.probe, ProbeBudget: c.probeN, ProbeHold: c.probeHold, Leases: c.leaseOpts, OnLease: c.leaseEnded,
	})
	if c.fallback != nil {
		c.out = newOutage(*c.fallback, rdb, c.hooks.Outage)
	}
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
	r.sk = script.KeysOf(r.keys)
	r.lane = "1" + r.keys.Config
	if c.cluster && !r.keys.SameSlot() || c.ring && !r.keys.SameTag() {
		r.err = errors.Join(r.err, ErrCrossSlot)
	}
	return r
}

// Limiter is one named limiter, seen through one Client. It holds no
// state of its own beyond its key names and is safe for concurrent use.
type Limiter struct {
	c    *Client
	name string
	keys wire.Keys
	sk   script.Keys // the keys as the scripts take them, made once
	lane string      // the engine's lane key (target.go), made once
	err  error
}

// Name returns the name the limiter was made with, before name mapping.
func (r *Limiter) Name() string { return r.name }

// stamp returns the clock argument of a script call (script.Conn.Stamp):
// the server's clock by default, the Client's with WithServerClock(false).
func (c *Client) stamp() any { return c.conn.Stamp() }
