package script

import "time"

// Sources are the Lua sources, by file name, for tests that hold the Go
// rules and the scripts to each other.
var Sources = map[string]string{
	"lib.lua":         luaLib,
	"acquire.lua":     luaAcquire,
	"acquire_all.lua": luaAcquireAll,
}

// GrantedAny reports whether an acquire script reply grants anything
// (what a replica must acknowledge), for tests.
func GrantedAny(reply any) bool { return grantedAny(reply) }

// HintDuration turns a hint in ms into a positive Duration, saturating,
// as the reply parsers do; for tests.
func HintDuration(ms int64) time.Duration { return hintDuration(ms) }

// Guarded wraps a script that raises its errors as tables (lib.lua) so
// that every server, Redis 6.2 included, replies with that error, as the
// library sends them; for tests that run lib.lua's rules themselves.
func Guarded(src string) string { return guarded(src) }
