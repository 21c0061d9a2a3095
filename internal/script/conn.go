// Package script runs the library's Lua scripts on Redis and reads their
// replies: the embedded scripts (lua/), EVALSHA with EVAL on a flushed
// cache, calls bounded by their context, the reply parsers, and the Redis
// plumbing around them (the user's permissions, the server's eviction
// policy, WAIT for WithReplicaAck, Cluster slot map reloads, stamps and
// TIME samples). It never imports the root package; the root's Limiter
// and Composite are the engine's targets through it.
package script

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// Options configure a Conn; the root sets them from its options.
type Options struct {
	// Format is the permit record format written; Tag is written in every
	// record (wire.New).
	Format wire.Format
	Tag    wire.Tag
	// Clock is the Client's clock; with ClientClock it stamps records
	// (WithServerClock(false)), else the scripts read Redis's TIME.
	Clock       func() time.Time
	ClientClock bool
	// Replicas and AckTimeout are WithReplicaAck's; 0 replicas: off.
	Replicas   int
	AckTimeout time.Duration
}

// Conn is one Client's way to Redis. It is safe for concurrent use.
type Conn struct {
	rdb         redis.UniversalClient
	format      wire.Format
	tag         wire.Tag
	clock       func() time.Time
	clientClock bool
	ack         replicaAck    // WithReplicaAck; zero: off
	refresh     refresher     // cluster slot map reloads (topology.go)
	perm        permState     // the user's permissions (permissions.go)
	evict       evictionState // the server's eviction policy (eviction.go)
	perClient   perClientSet  // limiters found PER_CLIENT (stamp.go)
	restart     restarts      // servers seen, restarts and fills (restart.go)
	watch       clockWatch    // the server's clock, for steps (clockstep.go)
	pipe        pipe          // acquire calls under load share writes (pipe.go)
}

// New returns a Conn on rdb (which may be nil: every call then fails in
// go-redis's way, and the root refuses to call).
func New(rdb redis.UniversalClient, o Options) *Conn {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Conn{rdb: rdb, format: o.Format, tag: o.Tag, clock: o.Clock, clientClock: o.ClientClock,
		ack: replicaAck{replicas: o.Replicas, timeout: o.AckTimeout}}
}

// Redis returns the Redis client.
func (c *Conn) Redis() redis.UniversalClient { return c.rdb }

// Keys are one limiter's keys as the scripts take them.
//
// In a Redis Cluster slot being migrated, Redis runs a command, a script
// call too, on the source node only while every key it declares is there:
// with some missing it answers TRYAGAIN, with all missing ASK (to the
// target). An acquire therefore declares the keys of one mode, Overall or
// PerClient, not all five: the other mode's keys do not exist. The script
// answers -2, having written nothing, when the limiter is of the other
// mode (lua/acquire.lua).
type Keys struct {
	// All is K1..K5 in the scripts' order.
	All []string
	// Overall is K1, K2 and K4: what an OVERALL acquire needs.
	Overall []string
	// PerClient is K1..K5 with K2 and K4 given as K1: what a PER_CLIENT
	// acquire needs.
	PerClient []string
}

// KeysOf returns k as the scripts take them. The three lists share one
// array (one allocation: per-user limiters open a Limiter per decision),
// each capped at its length so that an append never writes into another.
func KeysOf(k wire.Keys) Keys {
	a := []string{
		k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits, // All
		k.Config, k.Value, k.Permits, // Overall
		k.Config, k.Config, k.ClientValue, k.Config, k.ClientPermits, // PerClient
	}
	return Keys{All: a[0:5:5], Overall: a[5:8:8], PerClient: a[8:13:13]}
}

// probeKeys returns the keys lua/probe.lua declares for a call that
// declares keys (K1..K5, or Overall's or PerClient's form): K1, then the
// value and permits keys the call declares as K2 and K4, and K1 for K3
// and K5, which the probe does not touch. The probe then runs where the
// call runs during a slot migration (see Keys).
func probeKeys(keys []string) []string {
	if len(keys) == 3 {
		return []string{keys[0], keys[1], keys[0], keys[2], keys[0]}
	}
	value, permits := keys[1], keys[3]
	if value == keys[0] {
		value, permits = keys[2], keys[4]
	}
	return []string{keys[0], value, keys[0], permits, keys[0]}
}
