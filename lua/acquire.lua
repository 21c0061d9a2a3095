-- tryAcquire for one request or a batch of them, decided in order at one
-- clock reading, as if they had come one after another.
--
-- ARGV: now (ms); the record prefix (a permit record of the client's member
-- format without its last four bytes, which this script appends: the sum of
-- the permits granted); the reply form; then the permits of each request.
-- One record holds everything the call grants: Redisson sums the permits
-- of records, so its budget is the same as with one record per request
-- (docs/protocol.md, "Combined records").
--
-- Reply form '0' (exactly one request; the cheap hot path): one integer,
-- the permits left (>= 0) on a grant, -1 when the record collided with an
-- existing one (nothing was granted: retry with a fresh prefix), otherwise
-- minus the wait hint in ms (at least 2); RLEXCEED when the request
-- exceeds the rate.
-- Reply form '2' is form '1' for queued waiters: after the first refusal,
-- every later request is refused too, so that no waiter takes permits
-- that one ahead of it is waiting for.
-- Reply form '1': -1 on a collision, otherwise a table {rate, interval,
-- reset, then per request: granted (1 or 0), permits left after it, hint}.
-- reset is the ms until the oldest record in the window expires (0 when
-- none). A request over the rate is refused with hint 0 and changes
-- nothing; the caller reports ErrPermitsExceedRate.
--
-- This script stands alone (scripts.go sends it without lib.lua): it is
-- the hot path, and every Lua call shows in Redis's work per call
-- (internal/compat instruction counts). The blocks marked "mirrors
-- lib.lua" implement the same rules as lib.lua's functions of that name;
-- state_test.go feeds the same states to both and expects the same budget.
-- Every check runs before the first write, and errors carry the prefixes
-- that errors.go maps.

-- Exact integers only: Lua numbers are doubles.
local MAX = 9007199254740991
-- Bounds on the work of one call (README, "Bounded work"): expired records
-- released per call, records read to recount a window, records read for a
-- wait hint.
local EXPIRE_CHUNK, RECOUNT_MAX, HINT_WALK = 1000, 10000, 16

-- mirrors lib.lua: limiter()
local c = redis.call('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
if not (c[1] and c[2] and c[3]) then
  return redis.error_reply('RLNOTINIT RateLimiter is not initialized')
end
local keep = c[4] or '0'
if not (string.find(c[1], '^%d+$') and string.find(c[2], '^%d+$') and string.find(keep, '^%d+$')) then
  return redis.error_reply('RLSTATE config fields are not decimal integers')
end
local rate, interval = tonumber(c[1]), tonumber(c[2])
keep = tonumber(keep)
if rate < 1 or interval < 1 or rate > MAX or interval > MAX or keep > MAX then
  return redis.error_reply('RLSTATE rate or interval below 1, or a field above 2^53-1')
end
local valueKey, permitsKey = KEYS[2], KEYS[4]
if c[3] == '1' then
  valueKey, permitsKey = KEYS[3], KEYS[5]
elseif c[3] ~= '0' then
  return redis.error_reply('RLSTATE unknown type ' .. c[3])
end
local single = ARGV[3] == '0'
if single and tonumber(ARGV[4]) > rate then
  return redis.error_reply('RLEXCEED Requested permits amount cannot exceed defined rate')
end
local now = tonumber(ARGV[1])
local cutoff = now - interval

-- Sums the permit counts (the last four bytes, little-endian, in every
-- Redisson member format) of a flat list of members, or of members and
-- scores when step is 2; nil for a record too short to hold one.
local function sum(list, step)
  local total = 0
  for i = 1, #list, step do
    local m = list[i]
    if #m < 4 then
      return nil
    end
    local a, b, c, d = string.byte(m, -4, -1)
    total = total + a + b * 256 + c * 65536 + d * 16777216
  end
  return total
end

-- mirrors lib.lua: settle()
local stored = redis.call('GET', valueKey)
local value = rate
if stored then
  if not string.find(stored, '^-?%d+$') then
    return redis.error_reply('RLSTATE value is not a decimal integer')
  end
  value = tonumber(stored)
  if value > MAX or value < -MAX then
    return redis.error_reply('RLSTATE value beyond 2^53-1')
  end
end
local old = redis.call('ZRANGEBYSCORE', permitsKey, '-inf', cutoff, 'LIMIT', 0, EXPIRE_CHUNK)
local released = sum(old, 1)
if not released then
  return redis.error_reply('RLSTATE permit record shorter than 4 bytes')
end
local changed = not stored
if not stored or value + released > rate then
  -- The value key is gone while records remain (an evicting policy), or
  -- permits came back that the records still hold (a Redisson release or
  -- availablePermits): count the window's records instead.
  local live = redis.call('ZRANGEBYSCORE', permitsKey, string.format('(%d', cutoff), '+inf', 'LIMIT', 0, RECOUNT_MAX + 1)
  local used = sum(live, 1)
  if not used then
    return redis.error_reply('RLSTATE permit record shorter than 4 bytes')
  end
  if #live > RECOUNT_MAX then
    -- Too many to count in one call: grant nothing until records expire.
    value = 0
  else
    value = rate - used
  end
  changed = true
elseif #old > 0 then
  value = value + released
  changed = true
end

-- The oldest records in the window, as {member, score, ...}: read once, and
-- only when a refusal needs a hint or the reply needs the reset time, before
-- any request is decided.
local window
local function readWindow()
  window = redis.call('ZRANGE', permitsKey, #old, #old + HINT_WALK - 1, 'WITHSCORES')
  if not sum(window, 2) then
    return redis.error_reply('RLSTATE permit record shorter than 4 bytes')
  end
  if #window == 0 and value < rate then
    -- Nothing is outstanding, yet the value says permits are gone (the set
    -- expired or was deleted apart from the value). Nothing would ever
    -- give them back: start the window afresh.
    value = rate
    changed = true
  end
end

-- The ms until enough records expire to free need permits, at least 2
-- and at most the interval plus Redisson's 3 ms; records stamped in the
-- future of this clock are waited for one interval at a time. Permits that
-- this call grants are freed last, one interval from now.
local function hint(need)
  local freed, at = 0, now
  for i = 1, #window, 2 do
    local a, b, c, d = string.byte(window[i], -4, -1)
    freed = freed + a + b * 256 + c * 65536 + d * 16777216
    at = tonumber(window[i + 1])
    if freed >= need then
      break
    end
  end
  if freed < need and #window < 2 * HINT_WALK then
    at = now
  end
  return math.max(2, math.min(interval + 3, 3 + interval - (now - at)))
end

if not single then
  local err = readWindow()
  if err then
    return err
  end
end
local strict, stop = ARGV[3] == '2', false
local total, out = 0, {}
for i = 4, #ARGV do
  local n = tonumber(ARGV[i])
  if value < n and not window then
    local err = readWindow()
    if err then
      return err
    end
  end
  if n > rate then
    out[#out + 1], out[#out + 2], out[#out + 3] = 0, value, 0
  elseif value >= n and not stop then
    value, total = value - n, total + n
    out[#out + 1], out[#out + 2], out[#out + 3] = 1, value, 0
  else
    out[#out + 1], out[#out + 2], out[#out + 3] = 0, value, hint(math.max(1, n - value))
    stop = strict
  end
end

-- The first write: a collision leaves everything as it was.
if total > 0 and redis.call('ZADD', permitsKey, 'NX', now, ARGV[2] .. struct.pack('<I', total)) == 0 then
  return -1
end
if #old > 0 then
  redis.call('ZREMRANGEBYRANK', permitsKey, 0, #old - 1)
end
if changed then
  redis.call('SET', valueKey, value)
elseif total > 0 then
  redis.call('DECRBY', valueKey, total)
end

-- mirrors lib.lua: refresh()
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

if single then
  if out[1] == 1 then
    return value
  end
  return -out[3]
end
local reset = 0
if #window > 0 then
  reset = math.max(0, math.min(interval, interval - (now - tonumber(window[2]))))
elseif total > 0 then
  reset = interval
end
return {rate, interval, reset, unpack(out)}
