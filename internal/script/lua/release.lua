-- release. ARGV: permits (> 0), now (ms, or '' for the server's clock).
-- Gives the permits back (lib.lua, giveBack) and returns the permits given
-- back.
local now = clock(ARGV[2])
local rate, interval, keep, valueKey, permitsKey = limiter()
local value = settle(valueKey, permitsKey, now, interval, rate)
local given = giveBack(valueKey, permitsKey, now, interval, rate, value, tonumber(ARGV[1]))
refresh(valueKey, permitsKey, keep)
return given
