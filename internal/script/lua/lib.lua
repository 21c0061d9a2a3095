-- Shared prelude, prepended to every script that works on an initialised
-- limiter (see redis_scripts.go). Keys are always K1..K5 of docs/protocol.md:
-- config hash, overall value, client value, overall permits, client permits.
--
-- Every check that can refuse a call runs before the script's first write:
-- Redis does not roll a script back, so a refusal must leave nothing behind.
-- Errors carry a prefix that the Go side maps to a sentinel error:
-- RLNOTINIT, RLEXCEED, RLSTATE (state the protocol does not expect).

local function fail(code, msg)
  error({err = code .. ' ' .. msg})
end

-- A call that turns WRONGTYPE (a key of the wrong type: state the
-- protocol does not expect) into RLSTATE. Any other Redis error (OOM,
-- READONLY, NOPERM, ...) is raised as it is, so that the caller sees what
-- went wrong.
local function read(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 10) == 'WRONGTYPE ' then
      fail('RLSTATE', r.err)
    end
    error(r)
  end
  return r
end

-- Exact integers only: Lua numbers are doubles. The bounds on the work of
-- one call are acquire.lua's (README, "Bounded work").
local MAX = 9007199254740991
-- Interval and keep-alive at most this many ms, the longest time.Duration
-- (config.go, maxFieldMs).
local MAXMS = 9223372036854
local EXPIRE_CHUNK, RECOUNT_MAX = 1000, 10000
-- The probe record (wire.ProbeRecord) in Bc0I, Lc0I and fI, and how long
-- past its expiry, in ms, this library's scripts leave it in place with
-- its permit out (wire.ProbeHold; docs/fairness.md, "The probe record").
-- Redisson's scripts settle it when it expires. acquire.lua mirrors these;
-- TestProbeRecordMatchesLua holds them to wire.
local PROBE_B, PROBE_L, PROBE_F = '\16GoRLprob\0\0\0\0\0\0\0\0\1\0\0\0', '\13\0\0\0\0\0\0\0GoRL70726f620\1\0\0\0', '\0\0\0\127\1\0\0\0'
local PROBE_HOLD = 110

-- A decimal integer field in [lo, MAX], else RLSTATE.
local function whole(s, what, lo)
  local v = tonumber(s)
  local digits = '^%d+$'
  if lo < 0 then
    digits = '^-?%d+$'
  end
  if not string.find(s, digits) or v < lo or v > MAX then
    fail('RLSTATE', what .. ' is not a decimal integer in [' .. lo .. ', 2^53-1]: ' .. s)
  end
  return v
end

-- Returns the clock reading a script stamps and expires by, as a number
-- and as the decimal string that ZADD takes: arg, the client's reading in
-- ms, or, when arg is empty, the server's (TIME, to the ms). Scripts are
-- replicated by their effects (Redis 6.2 and later, Valkey), so a replica
-- stores the stamp the master read. A stall cannot make the server's
-- reading stale: the script reads it when it runs (docs/protocol.md,
-- "Clocks"). acquire.lua and acquire_all.lua mirror this block.
local function clock(arg)
  if arg ~= '' then
    return tonumber(arg), arg
  end
  local t = redis.call('TIME')
  local stamp = t[1] .. string.sub('00000' .. t[2], -6, -4)
  return stamp + 0, stamp
end

-- Returns rate, interval, keepAlive, value key, permits key of the
-- limiter whose keys are KEYS[b + 1] to KEYS[b + 5] (b: 0 when absent).
-- acquire.lua mirrors this block.
local function limiter(b)
  b = b or 0
  local c = read('HMGET', KEYS[b + 1], 'rate', 'interval', 'type', 'keepAliveTime')
  if not c[1] or not c[2] or not c[3] then
    fail('RLNOTINIT', 'RateLimiter is not initialized')
  end
  local rate = whole(c[1], 'rate', 1)
  local interval = whole(c[2], 'interval', 1)
  local keep = 0
  if c[4] then keep = whole(c[4], 'keepAliveTime', 0) end
  if interval > MAXMS or keep > MAXMS then
    fail('RLSTATE', 'interval or keepAliveTime beyond ' .. MAXMS .. ' ms, the longest time.Duration')
  end
  if c[3] == '0' then
    return rate, interval, keep, KEYS[b + 2], KEYS[b + 4]
  elseif c[3] == '1' then
    return rate, interval, keep, KEYS[b + 3], KEYS[b + 5]
  end
  fail('RLSTATE', 'unknown type ' .. c[3])
end

-- The permit count is the last four bytes of a member, little-endian, in
-- every member format Redisson has used; a member shorter than that holds
-- none (so every script reads it alike, whichever records it reads).
local function sum(members)
  local total = 0
  for _, m in ipairs(members) do
    if #m >= 4 then
      local a, b, c, d = string.byte(m, -4, -1)
      total = total + a + b * 256 + c * 65536 + d * 16777216
    end
  end
  return total
end

-- Returns the index in old (the expired records read, in score order) of
-- the probe record while it is held (PROBE_HOLD), or nil. Its score is read
-- only when it is there: once an interval at most.
local function probeHeld(permitsKey, old, cutoff)
  for i = 1, #old do
    if old[i] == PROBE_B or old[i] == PROBE_L or old[i] == PROBE_F then
      local s = redis.call('ZSCORE', permitsKey, old[i])
      if s and s + 0 > cutoff - PROBE_HOLD then
        return i
      end
      return nil
    end
  end
  return nil
end

-- Removes the n oldest records of permitsKey but the k-th (a held probe
-- record; nil: none), the later ones first so that ranks hold.
local function unrecord(permitsKey, n, k)
  if not k then
    if n > 0 then
      redis.call('ZREMRANGEBYRANK', permitsKey, 0, n - 1)
    end
    return
  end
  if k < n then
    redis.call('ZREMRANGEBYRANK', permitsKey, k, n - 1)
  end
  if k > 1 then
    redis.call('ZREMRANGEBYRANK', permitsKey, 0, k - 2)
  end
end

-- Returns the permits available now and whether that differs from what the
-- value key holds, and removes up to EXPIRE_CHUNK records whose interval
-- has ended (a later call removes the rest), but the probe record while
-- it is held (probeHeld), which gives nothing back. Writes nothing else: the
-- caller stores the value. When the value key is gone while records remain
-- (an evicting policy), or the released permits would lift the value past
-- the rate (permits that the records still hold came back through a
-- Redisson release or availablePermits), the value is recounted from the
-- records in the window. acquire.lua mirrors this block, and wire.Settle
-- (wire/settle.go) in Go, held to this by TestSettleLikeScript.
local function settle(valueKey, permitsKey, now, interval, rate)
  local stored = read('GET', valueKey)
  local value = rate
  if stored then
    value = whole(stored, 'value', -MAX)
  end
  local cutoff = now - interval
  local old = read('ZRANGEBYSCORE', permitsKey, '-inf', cutoff, 'LIMIT', 0, EXPIRE_CHUNK)
  local released = sum(old)
  local held = probeHeld(permitsKey, old, cutoff)
  local freeing = #old
  if held then
    released, freeing = released - 1, freeing - 1
  end
  local changed = not stored
  if not stored or value + released > rate then
    local live = read('ZRANGEBYSCORE', permitsKey, string.format('(%d', cutoff), '+inf', 'LIMIT', 0, RECOUNT_MAX + 1)
    local used = sum(live)
    if #live > RECOUNT_MAX then
      value = 0
    else
      value = rate - used
    end
    changed = true
  elseif freeing > 0 then
    value = value + released
    changed = true
  end
  unrecord(permitsKey, #old, held)
  -- When the records are gone while the value says permits are out (an
  -- evicting policy), the value stands: the next refused acquisition
  -- writes a record that gives them back an interval later (acquire.lua).
  return value, changed
end

-- Redis does not roll a script back: a command the ACL refuses after a
-- script's first write would leave that write alone (an ACL changed since
-- the Client's probe, permissions.go). So each script, before its first
-- write, calls allow with every command it may run after it and that
-- command's key (a flat list: command, key, command, key, ...); with
-- redis.acl_check_cmd (Redis 7.0 and later, Valkey), a command the user
-- may not run refuses the call there with NOPERM, nothing written. Redis
-- 6.2 lacks it and relies on the probe alone (docs/operations.md).
local function allow(checks)
  local acl = redis.acl_check_cmd
  if not acl then
    return
  end
  for i = 1, #checks, 2 do
    if not acl(checks[i], checks[i + 1]) then
      fail('NOPERM', "this user has no permissions to run the '" .. string.lower(checks[i]) ..
        "' command (checked before the script's first write: nothing was written)")
    end
  end
end

-- Appends to checks, for allow, the commands refresh runs with these
-- arguments (configKey: KEYS[1] when absent), and returns checks.
local function refreshing(checks, valueKey, permitsKey, keep, configKey)
  local first = 'PTTL'
  if keep > 0 then
    first = 'PEXPIRE'
  end
  for _, c in ipairs({first, configKey or KEYS[1], 'PEXPIRE', valueKey, 'PEXPIRE', permitsKey}) do
    checks[#checks + 1] = c
  end
  return checks
end

-- With keep-alive every use extends all keys; without it the state keys
-- follow whatever TTL the config hash (configKey, KEYS[1] when absent)
-- has, so they never outlive it. acquire.lua mirrors this block.
local function refresh(valueKey, permitsKey, keep, configKey)
  configKey = configKey or KEYS[1]
  if keep > 0 then
    redis.call('PEXPIRE', configKey, keep)
    redis.call('PEXPIRE', valueKey, keep)
    redis.call('PEXPIRE', permitsKey, keep)
    return
  end
  local ttl = redis.call('PTTL', configKey)
  if ttl > 0 then
    redis.call('PEXPIRE', valueKey, ttl)
    redis.call('PEXPIRE', permitsKey, ttl)
  end
end
