package script

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts live in lua/. Those that act on an initialised limiter share
// lua/lib.lua, prepended here so that each script stays one EVALSHA. The
// acquire script is the hot path and is sent alone: it carries its own
// copies of lib.lua's rules (marked "mirrors lib.lua" in both files, and
// tested to agree in state_test.go). acquire_all.lua (composites) is sent
// alone too and applies acquire.lua's rules to each part.
var (
	//go:embed lua/lib.lua
	luaLib string
	//go:embed lua/acquire.lua
	luaAcquire string
	//go:embed lua/acquire_all.lua
	luaAcquireAll string
	//go:embed lua/giveback.lua
	luaGiveBack string
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/release_all.lua
	luaReleaseAll string
	//go:embed lua/available.lua
	luaAvailable string
	//go:embed lua/setrate.lua
	luaSetRate string
	//go:embed lua/trysetrate.lua
	luaTrySetRate string
	//go:embed lua/expire.lua
	luaExpire string
	//go:embed lua/lease_return.lua
	luaLeaseReturn string
	//go:embed lua/lease.lua
	luaLease string
	//go:embed lua/lease_end.lua
	luaLeaseEnd string
	//go:embed lua/fill.lua
	luaFill string
	//go:embed lua/many.lua
	luaMany string
	//go:embed lua/many_clock.lua
	luaManyClock string
)

var (
	scriptAcquire    = redis.NewScript(luaAcquire)
	scriptAcquireAll = redis.NewScript(guarded(luaAcquireAll))
	// The acquire scripts for a server that may evict limiter keys
	// (redis_eviction.go): [0] allkeys-*, [1] volatile-*.
	scriptAcquireEvicts    = [2]*redis.Script{evicts(luaAcquire, "allkeys"), evicts(luaAcquire, "volatile")}
	scriptAcquireAllEvicts = [2]*redis.Script{evicts(guarded(luaAcquireAll), "allkeys"), evicts(guarded(luaAcquireAll), "volatile")}
	scriptRelease          = redis.NewScript(guarded(luaLib + luaGiveBack + luaRelease))
	scriptReleaseAll       = redis.NewScript(guarded(luaLib + luaGiveBack + luaReleaseAll))
	scriptAvailable        = redis.NewScript(guarded(luaLib + luaAvailable))
	scriptSetRate          = redis.NewScript(guarded(luaLib + luaSetRate))
	scriptTrySetRate       = redis.NewScript(guarded(luaLib + luaTrySetRate))
	scriptExpire           = redis.NewScript(luaExpire)
	// The lease scripts (internal/engine, target.go) share
	// lease_return.lua's returnRecord.
	scriptLease    = redis.NewScript(guarded(luaLib + luaLeaseReturn + luaLease))
	scriptLeaseEnd = redis.NewScript(guarded(luaLib + luaLeaseReturn + luaLeaseEnd))
	// After a restart, failover or clock jump (restart.go).
	scriptFill = redis.NewScript(guarded(luaLib + luaFill))
	// manyOf: for each acquire script, the script that decides several
	// of its calls at once (lua/many.lua, many.go).
	manyOf = map[*redis.Script]*manyScript{
		scriptAcquire:          many(0, luaAcquire),
		scriptAcquireEvicts[0]: many(1, evictsSrc(luaAcquire, "allkeys")),
		scriptAcquireEvicts[1]: many(2, evictsSrc(luaAcquire, "volatile")),
	}
)

// guarded wraps a script that raises its errors with error({err = ...})
// (lib.lua, acquire_all.lua) so that the caller gets that error reply on
// every server: Redis 6.2's script error handler concatenates the error
// with its source line and fails on a table. Inside pcall no handler
// runs; an error table is returned as the reply, and a string (a Lua
// error, or a command error as 6.2 raises it) becomes an error reply.
// acquire.lua returns its errors and is sent unwrapped.
func guarded(src string) string {
	return "local function main()\n" + src + "\nend\n" +
		"local ok, r = pcall(main)\n" +
		"if ok then return r end\n" +
		"if type(r) == 'table' and r.err then return r end\n" +
		"return redis.error_reply(tostring(r))\n"
}

// evicts returns the script src with its EVICTS constant set to kind.
func evicts(src, kind string) *redis.Script { return redis.NewScript(evictsSrc(src, kind)) }

// evictsSrc returns src with its EVICTS constant set to kind.
func evictsSrc(src, kind string) string {
	out := strings.Replace(src, "local EVICTS = false", "local EVICTS = '"+kind+"'", 1)
	if out == src {
		panic("ratelimiter: a script lacks its EVICTS line") // caught by every test
	}
	return out
}

// The scripts the root runs through Conn.Eval (reply: one integer).
var (
	Release    = scriptRelease    // lua/release.lua: n permits back
	Available  = scriptAvailable  // lua/available.lua: permits available now
	SetRate    = scriptSetRate    // lua/setrate.lua
	TrySetRate = scriptTrySetRate // lua/trysetrate.lua
	Expire     = scriptExpire     // lua/expire.lua
)
