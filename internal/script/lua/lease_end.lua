-- lease end: give back the unused permits of one lease (lease_return.go:
-- at the lease's deadline, on Client.Close, after this Client's SetRate or
-- Delete, for a lease whose call was abandoned, and again after a return
-- whose outcome is unknown). redis_scripts.go sends lib.lua,
-- lease_return.lua and this file, guarded.
--
-- KEYS: K1..K5. ARGV: the clock ('' for the server's), the lease's exact
-- member, the permits to give back. Returns the permits given back.
-- Idempotent (lease_return.lua). A missing value key gives nothing back
-- and writes nothing (see lease.lua); the record then expires with its
-- permits.
local now = clock(ARGV[1])
local rate, interval, keep, valueKey, permitsKey = limiter()
if not read('GET', valueKey) then
  return 0
end
allow(refreshing({'ZSCORE', permitsKey, 'ZREM', permitsKey, 'ZADD', permitsKey, 'SET', valueKey},
  valueKey, permitsKey, keep))
local value, changed = settle(valueKey, permitsKey, now, interval, rate)
local given
given, value = returnRecord(permitsKey, now, interval, rate, value, ARGV[2], tonumber(ARGV[3]))
if changed or given > 0 then
  redis.call('SET', valueKey, value)
end
refresh(valueKey, permitsKey, keep)
return given
