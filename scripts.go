package ratelimiter

import (
	_ "embed"

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
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/available.lua
	luaAvailable string
	//go:embed lua/setrate.lua
	luaSetRate string
	//go:embed lua/trysetrate.lua
	luaTrySetRate string
	//go:embed lua/expire.lua
	luaExpire string
)

var (
	scriptAcquire    = redis.NewScript(luaAcquire)
	scriptAcquireAll = redis.NewScript(luaAcquireAll)
	scriptRelease    = redis.NewScript(luaLib + luaRelease)
	scriptAvailable  = redis.NewScript(luaLib + luaAvailable)
	scriptSetRate    = redis.NewScript(luaLib + luaSetRate)
	scriptTrySetRate = redis.NewScript(luaLib + luaTrySetRate)
	scriptExpire     = redis.NewScript(luaExpire)
)
