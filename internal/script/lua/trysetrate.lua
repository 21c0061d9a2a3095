-- trySetRate. KEYS: the limiter's five keys. ARGV: rate, interval, type,
-- keepAlive, full (1/0), now (ms, or '' for the server's clock), a permit
-- record, the value to store with it. Returns 1 when the type field was newly set.
-- With full set (the server may evict the limiter's keys), a limiter set
-- up here while none of its state is left starts with its window full:
-- the record (stamped now) holds the permits and the value the rest, so
-- that a limiter re-created after its keys were evicted does not grant
-- its rate again.
local stamp = ARGV[6]
if ARGV[5] == '1' then
  local _ -- the clock is read before the first write
  _, stamp = clock(ARGV[6])
end
local keep = tonumber(ARGV[4])
-- The commands after the first write (lib.lua, allow); the later HSETNX
-- are the first one's command on its key.
local checks = {}
if keep > 0 then
  checks = {'PEXPIRE', KEYS[1]}
end
if ARGV[5] == '1' then
  local valueKey, permitsKey = KEYS[2], KEYS[4]
  if ARGV[3] == '1' then
    valueKey, permitsKey = KEYS[3], KEYS[5]
  end
  for _, c in ipairs({'EXISTS', valueKey, 'EXISTS', permitsKey, 'ZADD', permitsKey, 'SET', valueKey}) do
    checks[#checks + 1] = c
  end
  refreshing(checks, valueKey, permitsKey, keep)
end
allow(checks)
read('HSETNX', KEYS[1], 'rate', ARGV[1])
redis.call('HSETNX', KEYS[1], 'interval', ARGV[2])
redis.call('HSETNX', KEYS[1], 'keepAliveTime', ARGV[4])
local set = redis.call('HSETNX', KEYS[1], 'type', ARGV[3])
if set == 1 and keep > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
if set == 1 and ARGV[5] == '1' then
  local valueKey, permitsKey = KEYS[2], KEYS[4]
  if ARGV[3] == '1' then
    valueKey, permitsKey = KEYS[3], KEYS[5]
  end
  if redis.call('EXISTS', valueKey) == 0 and redis.call('EXISTS', permitsKey) == 0 then
    redis.call('ZADD', permitsKey, stamp, ARGV[7])
    redis.call('SET', valueKey, ARGV[8])
    refresh(valueKey, permitsKey, keep)
  end
end
return set
