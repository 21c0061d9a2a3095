// Package ratelimiter is a distributed rate limiter on Redis that speaks
// Java Redisson's RRateLimiter protocol: a Go service and a Java service
// using Redisson can draw permits from the same limiter, see each other's
// acquisitions and change its rate from either side.
//
// A limiter grants at most Rate permits in any sliding window of Interval.
// Every operation is one Lua script, run atomically by Redis in one round
// trip. The keys and bytes are those of docs/protocol.md; see README.md for the
// mapping from Redisson's Java methods.
package ratelimiter

// A map for contributors. The root is flat and grouped by file prefix:
//
//   - ratelimiter.go, config.go, acquire.go, permits.go, expire.go,
//     timerate.go, hooks.go, errors.go: the API (Client, options, Limiter
//     and its calls, Result, Hooks, the sentinel errors).
//   - composite*.go: Client.All, several limiters taken from at once.
//   - combine_*.go: the combining engine. A lane per limiter in use
//     (combine_lane.go) sends one acquire script call for many callers
//     (combine_batch.go), blocked callers wait in its FIFO
//     (combine_waiters.go), WithMaxBatch(1) goes around it
//     (combine_direct.go), and refusals are answered locally for their
//     hint (combine_localrefusal.go). fairness.go spreads the wakes
//     beside other writers.
//   - lease.go, combine_lease.go, combine_leasecall.go, lease_return.go:
//     leased permits (WithLeases): the options and events, the fast path,
//     the lease call from the lane, and the returns and Client.Close.
//   - redis_*.go: the Redis plumbing: running the scripts (redis_exec.go,
//     redis_scripts.go, lua/), Cluster slot map reloads, WithReplicaAck,
//     the user's permissions and the server's eviction policy.
//   - clock*.go: stamps and clock skew against Redis TIME.
//   - wire.go: the root's names for the wire package's types.
//
// The protocol has its own package, wire/: keys and slots, the record
// codec and the settle rules, the one Go home of rules the Lua scripts
// also hold. Tests: *_test.go beside the code; the harnesses that start
// servers live in internal/redistest and internal/redisproc, the Java
// suite in internal/compat. CONTRIBUTING.md has the commands.
