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

// A map for contributors. The package tree shows the architecture; imports
// run one way, from the face down:
//
//	ratelimiter (this package: the face)
//	  ├─► internal/engine: lanes, batches, waiters, local refusals,
//	  │     fair wakes, probes and leases, above the script call
//	  ├─► internal/script: the Lua scripts, their calls and replies,
//	  │     and the Redis plumbing around them
//	  └─► wire: the protocol's rules (keys, records, settling, config)
//
// This package holds what a user calls: ratelimiter.go (Client, Limiter),
// options.go (every option and its default), config.go (Config,
// TrySetRate, SetRate, UpdateRate), acquire.go (Result, Allow, TryAcquire,
// the waits), permits.go (Release, AvailablePermits), expire.go,
// composite.go (Client.All, Weighted), lease.go (LeaseOptions, LeaseEvent,
// Close), hooks.go (Hooks, Decision), clock_skew.go (ClockSkew,
// MeasureClock), errors.go (the sentinel errors, LimiterError) and
// target.go, the engine's view of a Limiter and a Composite.
//
// internal/engine decides acquisitions without Redis: every Redis call goes
// through its Target (one script call per decision), which target.go
// implements over internal/script. Its tests run on a fake target with a
// fake clock. internal/script never imports this package either: it
// returns the engine's verdicts and sentinel errors that this package
// exports under the same names.
//
// Packages for users beside the face: timerate (x/time/rate's method
// names), diag (eviction and permission checks for tools), httplimit and
// gate (HTTP middleware); other modules hold the CLI, otel and grpclimit.
// Test rigs live in internal/redistest and internal/redisproc, the Java
// suite in internal/compat. CONTRIBUTING.md has the commands.
