-- Shared prelude, prepended to every script that works on an initialised
-- limiter (see scripts.go). Keys are always K1..K5 of PROTOCOL.md:
-- config hash, overall value, client value, overall permits, client permits.
--
-- Every check that can refuse a call runs before the script's first write:
-- Redis does not roll a script back, so a refusal must leave nothing behind.
-- Errors carry a prefix that the Go side maps to a sentinel error:
-- RLNOTINIT, RLEXCEED, RLSTATE (state the protocol does not expect).

local function fail(code, msg)
  error({err = code .. ' ' .. msg})
end

-- A read that turns a Redis error (WRONGTYPE) into RLSTATE instead of a
-- raw script error.
local function read(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    fail('RLSTATE', r.err)
  end
  return r
end

local function whole(s, what)
  local v = tonumber(s)
  if v == nil or v ~= math.floor(v) then
    fail('RLSTATE', what .. ' is not an integer: ' .. tostring(s))
  end
  return v
end

-- Returns rate, interval, keepAlive, value key, permits key.
local function limiter()
  local c = read('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
  if not c[1] or not c[2] or not c[3] then
    fail('RLNOTINIT', 'RateLimiter is not initialized')
  end
  local rate = whole(c[1], 'rate')
  local interval = whole(c[2], 'interval')
  local keep = 0
  if c[4] then keep = whole(c[4], 'keepAliveTime') end
  if c[3] == '0' then
    return rate, interval, keep, KEYS[2], KEYS[4]
  elseif c[3] == '1' then
    return rate, interval, keep, KEYS[3], KEYS[5]
  end
  fail('RLSTATE', 'unknown type ' .. c[3])
end

-- The permit count is the last four bytes of a member, little-endian, in
-- every member format Redisson has used.
local function sum(members)
  local total = 0
  for _, m in ipairs(members) do
    if #m < 4 then
      fail('RLSTATE', 'permit record shorter than 4 bytes')
    end
    local a, b, c, d = string.byte(m, -4, -1)
    total = total + a + b * 256 + c * 65536 + d * 16777216
  end
  return total
end

-- Releases the records at or before cutoff. Returns the new value and
-- whether it changed. When the released permits would lift the value past
-- the rate (permits came back through release(), or a Redisson
-- availablePermits stored an uncapped sum), the value is recounted from
-- the records still in the window.
local function expire(permitsKey, cutoff, value, rate)
  local old = read('ZRANGEBYSCORE', permitsKey, '-inf', cutoff)
  local released = sum(old)
  if value + released > rate then
    value = rate - (sum(read('ZRANGE', permitsKey, 0, -1)) - released)
  elseif #old == 0 then
    return value, false
  else
    value = value + released
  end
  if #old > 0 then
    redis.call('ZREMRANGEBYSCORE', permitsKey, '-inf', cutoff)
  end
  return value, true
end

-- With keep-alive every use extends all keys; without it the state keys
-- follow whatever TTL the config hash has, so they never outlive it.
local function refresh(valueKey, permitsKey, keep)
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[1], keep)
    redis.call('PEXPIRE', valueKey, keep)
    redis.call('PEXPIRE', permitsKey, keep)
    return
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', valueKey, ttl)
    redis.call('PEXPIRE', permitsKey, ttl)
  end
end
