-- lease: take a block of permits for one Client to hand out itself
-- (combine_leasecall.go, WithLeases), in one record, and give back the
-- unused permits of the Client's previous lease of this limiter in the
-- same call. redis_scripts.go sends lib.lua, lease_return.lua and this
-- file, guarded.
--
-- KEYS: K1..K5 of docs/protocol.md (either mode: lib.lua's limiter()).
-- ARGV:
--   [1] the clock: '' (leases run on the server's clock only)
--   [2] the new record without its last four bytes (the Client's member
--       format and tag, a fresh random part); the script appends the count
--   [3] need: the permits of the callers that wait on this call (>= 1)
--   [4] want: need plus the lease asked for (>= need, <= 4294967295)
--   [5] share, in millionths: a lease is granted only while the window,
--       after it, holds at most share x rate permits
--   [6] the previous lease's exact member, or '' for none
--   [7] the permits to give back from it (0 for none)
--
-- Reply: {granted, value, rate, interval, reset, stamp, returned}.
-- granted is 0 (no lease: Go decides its batch through acquire.lua), -1
-- (the new record collided with an existing one: nothing granted, the
-- return was applied; Go retries with a fresh record and the same,
-- idempotent, return), or at least need: one record of `granted` permits
-- stamped `stamp` (ms, the server's clock). value is the value after the
-- call, reset the ms until the window's oldest record expires, returned
-- the permits given back from the previous lease.
--
-- No lease while the value key is absent: acquire.lua's rules for a lost
-- value key (recount, eviction: start full, lost records) decide first;
-- the reply is then {0, 0, rate, interval, 0, 0, 0} with nothing written,
-- and the previous lease's return is not attempted (its record, if any,
-- expires in time).
--
-- Every check that can refuse the call (config, the value's syntax,
-- WRONGTYPE in settle's reads) runs before the first write (settle's
-- removal of expired records); after it every path stores what it
-- changed: each outcome is a complete state change.
local now, stamp = clock(ARGV[1])
local rate, interval, keep, valueKey, permitsKey = limiter()
local need, want, share = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local stored = read('GET', valueKey)
if not stored then
  return {0, 0, rate, interval, 0, 0, 0}
end

allow(refreshing({'ZSCORE', permitsKey, 'ZREM', permitsKey, 'ZADD', permitsKey, 'SET', valueKey,
  'ZRANGE', permitsKey}, valueKey, permitsKey, keep))
local value, changed = settle(valueKey, permitsKey, now, interval, rate)
local returned
returned, value = returnRecord(permitsKey, now, interval, rate, value, ARGV[6], tonumber(ARGV[7]))

-- The headroom: what the window may still take before it holds share x
-- rate. The callers' need comes first; a lease takes at most half of what
-- is left beyond it, so that other Clients' leases and direct calls find
-- room, and sizes shrink as the window fills.
local floor = rate - math.floor(rate * share / 1000000)
local room = value - floor
local granted = 0
if need <= room then
  granted = math.min(want, need + math.floor((room - need) / 2), 4294967295)
end

if granted > 0 then
  local member = ARGV[2] .. struct.pack('<I', granted)
  if redis.call('ZADD', permitsKey, 'NX', stamp, member) == 0 then
    granted = -1
  else
    value = value - granted
    changed = true
  end
end
if changed or returned > 0 then
  redis.call('SET', valueKey, value)
end
refresh(valueKey, permitsKey, keep)
if granted < 0 then
  return {-1, value, rate, interval, 0, now, returned}
end

local reset = 0
local first = redis.call('ZRANGE', permitsKey, 0, 0, 'WITHSCORES')
if first[2] then
  reset = math.max(0, math.min(interval, interval - (now - tonumber(first[2]))))
end
return {granted, value, rate, interval, reset, now, returned}
