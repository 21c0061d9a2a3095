-- setRate / updateRate. ARGV: rate, interval, type, keepAlive, mustExist
-- (1 = updateRate), keepState (1/0), now (ms, or '' for the server's
-- clock). Returns 1 when the config
-- was written, 0 when mustExist and the limiter does not exist.
local rate = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local mode = ARGV[3]
local keep = tonumber(ARGV[4])
local now = clock(ARGV[7])

local old = read('HGET', KEYS[1], 'type')
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end

local valueKey, permitsKey = KEYS[2], KEYS[4]
if mode == '1' then
  valueKey, permitsKey = KEYS[3], KEYS[5]
end
local modeChanged = old ~= false and old ~= mode
local keepState = ARGV[6] == '1' and not modeChanged

-- Read the records before writing anything, so that a bad record refuses
-- the whole call.
local cutoff = now - interval
local used = 0
if keepState then
  local live = read('ZRANGEBYSCORE', permitsKey, string.format('(%d', cutoff), '+inf', 'LIMIT', 0, RECOUNT_MAX + 1)
  used = sum(live)
  if #live > RECOUNT_MAX then
    -- Too many records to count in one call (bounded work): grant nothing
    -- until they expire.
    used = rate
  end
end

-- The commands after the first write (HSET), on this path (lib.lua, allow).
local checks = {}
if keep > 0 then
  checks = {'PEXPIRE', KEYS[1]}
end
if modeChanged then
  for i = 2, 5 do
    checks[#checks + 1], checks[#checks + 2] = 'DEL', KEYS[i]
  end
elseif not keepState then
  checks[#checks + 1], checks[#checks + 2], checks[#checks + 3], checks[#checks + 4] = 'DEL', valueKey, 'DEL', permitsKey
else
  checks[#checks + 1], checks[#checks + 2], checks[#checks + 3], checks[#checks + 4] = 'ZREMRANGEBYSCORE', permitsKey, 'SET', valueKey
  refreshing(checks, valueKey, permitsKey, keep)
end
allow(checks)

redis.call('HSET', KEYS[1], 'rate', rate, 'interval', interval, 'type', mode, 'keepAliveTime', keep)
if keep > 0 then
  redis.call('PEXPIRE', KEYS[1], keep)
end
if modeChanged then
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  return 1
end
if not keepState then
  redis.call('DEL', valueKey, permitsKey)
  return 1
end
redis.call('ZREMRANGEBYSCORE', permitsKey, '-inf', cutoff)
-- The value keeps the debt: a rate lowered under the permits still in the
-- window stores rate - used below 0, so that a later release or lease
-- return, which adds to the value, cannot make more available than the
-- rate less what the window holds (settle adds the expiring records back
-- to it as they leave).
redis.call('SET', valueKey, rate - used)
refresh(valueKey, permitsKey, keep)
return 1
