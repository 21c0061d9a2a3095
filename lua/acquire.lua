-- tryAcquire. ARGV: permits, now (ms), member (built by the client in the
-- fleet's member format). Replies one integer: the permits left available
-- (>= 0) when granted; -1 when the member collided with an existing one
-- (nothing was added: retry with a fresh member); otherwise minus the wait
-- hint in ms (the hint is at least 4).
--
-- This is the hot path, so it stands alone, without lib.lua: every Lua
-- function call, closure and table shows in Redis's work per call
-- (compat/instructions_test.go). As in lib.lua, every check runs before
-- the first write, and errors carry the prefixes that errors.go maps (a
-- WRONGTYPE from a read is mapped there too).
local c = redis.call('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
if not (c[1] and c[2] and c[3]) then
  return redis.error_reply('RLNOTINIT RateLimiter is not initialized')
end
local rate, interval, keep = tonumber(c[1]), tonumber(c[2]), tonumber(c[4] or 0)
if not (rate and interval and keep) or rate % 1 ~= 0 or interval % 1 ~= 0 or keep % 1 ~= 0 then
  return redis.error_reply('RLSTATE config fields are not integers')
end
local valueKey, permitsKey = KEYS[2], KEYS[4]
if c[3] == '1' then
  valueKey, permitsKey = KEYS[3], KEYS[5]
elseif c[3] ~= '0' then
  return redis.error_reply('RLSTATE unknown type ' .. c[3])
end
local n = tonumber(ARGV[1])
if n > rate then
  return redis.error_reply('RLEXCEED Requested permits amount cannot exceed defined rate')
end
local now = tonumber(ARGV[2])

local stored = redis.call('GET', valueKey)
local value = rate
local changed = false
local result = 0
if stored then
  value = tonumber(stored)
  if not value or value % 1 ~= 0 then
    return redis.error_reply('RLSTATE value is not an integer')
  end
  local cutoff = now - interval
  local old = redis.call('ZRANGEBYSCORE', permitsKey, '-inf', cutoff)
  local released = 0
  if #old > 0 or value > rate then
    -- Sums the permit counts (the last four bytes, little-endian, in every
    -- Redisson member format); nil for a record too short to hold one.
    local function sum(members)
      local total = 0
      for i = 1, #members do
        local m = members[i]
        if #m < 4 then
          return nil
        end
        local a, b, c, d = string.byte(m, -4, -1)
        total = total + a + b * 256 + c * 65536 + d * 16777216
      end
      return total
    end
    released = sum(old)
    if not released then
      return redis.error_reply('RLSTATE permit record shorter than 4 bytes')
    end
    if value + released > rate then
      -- Permits came back through release(), or a Redisson
      -- availablePermits stored an uncapped sum: recount from the window.
      local used = sum(redis.call('ZRANGE', permitsKey, 0, -1))
      if not used then
        return redis.error_reply('RLSTATE permit record shorter than 4 bytes')
      end
      value = rate - (used - released)
    else
      value = value + released
    end
    changed = true
  end
  if value < n then
    local oldest = redis.call('ZRANGE', permitsKey, #old, #old, 'WITHSCORES')
    if oldest[2] then
      result = 3 + interval - (now - tonumber(oldest[2]))
    else
      -- Nothing is outstanding, yet the value says the permits are gone
      -- (the set expired or was deleted apart from the value). Nothing
      -- would ever give them back: start the window afresh.
      value = rate
      changed = true
    end
  end
  if #old > 0 then
    redis.call('ZREMRANGEBYRANK', permitsKey, 0, #old - 1)
  end
else
  changed = true
end

if result == 0 then
  if redis.call('ZADD', permitsKey, 'NX', now, ARGV[3]) == 0 then
    result = -1
  else
    value = value - n
    if not changed then
      redis.call('DECRBY', valueKey, ARGV[1])
    end
  end
end
if changed then
  redis.call('SET', valueKey, value)
end

if keep > 0 then
  redis.call('PEXPIRE', KEYS[1], keep)
  redis.call('PEXPIRE', valueKey, keep)
  redis.call('PEXPIRE', permitsKey, keep)
else
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', valueKey, ttl)
    redis.call('PEXPIRE', permitsKey, ttl)
  end
end
if result == 0 then
  return value
elseif result > 0 then
  return -result
end
return -1
