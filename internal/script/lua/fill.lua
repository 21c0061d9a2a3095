-- fill, after the server holding the limiter restarted, was replaced by a
-- replica, or had its clock jump (restart.go). The window's records may
-- then hold less than was granted in the last interval (a snapshot taken
-- before the last grants, a replica that missed them), or expire early
-- by the jump. A record of the rate stamped at the event makes the window
-- full until an interval after it, as after eviction (acquire.lua), so the
-- lost grants are never granted again.
--
-- ARGV: the clock (lib.lua, clock()); the record without its last four
-- bytes (the same bytes for every Go Client that saw the event, so that
-- ZADD NX writes it once); the ms since the event. Returns 1 when this
-- call wrote the record, 0 when the event is an interval old or the record
-- is there already.
local rate, interval, keep, valueKey, permitsKey = limiter()
local now = clock(ARGV[1])
local since = whole(ARGV[3], 'ms since the event', 0)
if since >= interval then
  return 0
end
local stored = read('GET', valueKey)
if stored then
  whole(stored, 'value', -MAX)
end
allow(refreshing({'DECRBY', valueKey}, valueKey, permitsKey, keep))
-- The first write: everything that can refuse the call ran above.
local member = ARGV[2] .. struct.pack('<I', math.min(rate, 4294967295))
if redis.call('ZADD', permitsKey, 'NX', string.format('%d', now - since), member) == 0 then
  return 0
end
if stored then
  -- The record holds the rate: the value drops by as much, below 0 while
  -- older records remain, and settle adds each back as it expires.
  redis.call('DECRBY', valueKey, math.min(rate, 4294967295))
end
refresh(valueKey, permitsKey, keep)
return 1
