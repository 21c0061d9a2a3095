// Package wire is Redisson's RRateLimiter wire format as this library
// reads and writes it (docs/protocol.md): the keys of a limiter and their
// Cluster slot, the fields of its config hash, the byte layout of a permit
// record, and the rules by which a window settles. It is the one Go home
// of rules that also live in the Lua scripts (internal/script/lua/lib.lua); the tests of
// this package hold the two together against a real Redis.
//
// Applications use the root package; this one is for tools that read
// what Redisson and this library leave in Redis (the ratelimiter CLI and
// its exporter, tests, benchmarks). It follows the protocol, so it changes
// only when docs/protocol.md does.
package wire
