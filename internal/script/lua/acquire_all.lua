-- tryAcquire on several limiters at once (a Composite): each request takes
-- its permits from every part or from none. Requests are decided in order
-- at one clock reading, as acquire.lua decides them for one limiter.
--
-- KEYS: K1..K5 of docs/protocol.md for each part, part after part; the
-- keys of the mode Go does not take a part for may be given as its K1
-- (a call declares only keys that exist: in a Cluster slot being
-- migrated, Redis refuses a script whose keys are partly missing). A part
-- of the other mode then fails 'RLMODE p', with nothing written.
-- ARGV: now (ms), or '' for the server's clock (lib.lua, clock()), or
-- 13 digits and '.': the most the server's clock may read (acquire.lua); the
-- permit record in the client's member format (for
-- reply form '0', the whole record; otherwise the record without its last
-- four bytes); the reply form; then the weight of each part (k integers,
-- each >= 1); then the permits of each request. A request of n permits
-- takes n x weight from each part. Every part gets one record holding
-- the sum granted times its weight, under the same member but for the
-- last four bytes (which this script writes): each part stays an ordinary
-- Redisson limiter (docs/protocol.md, "Combined records"). Go keeps every
-- record's count within 2^32-1: the sum of a call's permits times the
-- largest weight (checkPermits, and Client.take in combine_lane.go).
--
-- Reply form '0' (exactly one request): one integer, the fewest permits
-- left among the parts (>= 0) on a grant, -1 when the record collided
-- with an existing one in some part (nothing was granted: retry with a
-- fresh record), otherwise minus the wait hint in ms, at most the interval
-- of the part that waits longest and 3 ms (as acquire.lua's).
-- Reply form '1': -1 on a collision, otherwise a table
-- {k, parts, binds, then per request: granted (1 or 0), fewest permits
-- left among the parts after it, hint}, where parts is {rate, interval,
-- reset} of each part followed, request after request, by {permits left,
-- hint} of each part (hint 0 when the part had the request's permits x
-- its weight, else the part's own hint for them), and binds names for
-- each request the part that binds it (1-based): on a grant, the one that
-- could grant the fewest more such requests (floor(left / weight); with
-- equal weights, the one with the fewest permits left); on a
-- refusal, the one that must wait longest; for a request over a part's
-- rate, that part (refused with hint 0, nothing changed). The granted flags
-- sit where acquire.lua's do (every third entry from the fourth), so that
-- grantedAny (redis_replicas.go) reads both scripts' replies.
-- Reply form '2' is form '1' for queued waiters: after the first refusal,
-- every later request is refused too.
--
-- A refusal's hint is the time until every part can grant: the largest of
-- the parts' hints, each found as acquire.lua finds it, at least 2 and at
-- most the interval of its part plus 3 ms.
--
-- Errors carry the part (1-based) after their prefix: 'RLNOTINIT 2 ...',
-- 'RLEXCEED 1 ...', 'RLSTATE 3 ...' (composite.go names the part). Every
-- check runs before the first write. The work per part is bounded as in
-- acquire.lua; Go sends at most MaxParts parts. This script stands alone
-- like acquire.lua, and its per-part blocks implement the same rules as
-- acquire.lua (TestScriptsAgree in reliability_test.go feeds both, and
-- lib.lua, the same states and expects the same budget).

local MAX, MAXMS = 9007199254740991, 9223372036854 -- acquire.lua's
local EXPIRE_CHUNK, RECOUNT_MAX, HINT_WALK = '1000', 10000, 16
local EVICTS = false -- as in acquire.lua
-- acquire.lua's (lib.lua's) probe record and its hold in ms.
local PROBE_B, PROBE_L, PROBE_F = '\16GoRLprob\0\0\0\0\0\0\0\0\1\0\0\0', '\13\0\0\0\0\0\0\0GoRL70726f620\1\0\0\0', '\0\0\0\127\1\0\0\0'
local PROBE_HOLD = 110

local function fail(code, p, msg)
  error({err = code .. ' ' .. p .. ' ' .. msg})
end

-- The permits the records of list hold (the last four bytes of each,
-- little-endian, in every Redisson member format).
local function sum(list, p)
  local total = 0
  for i = 1, #list do
    if #list[i] >= 4 then
      local a, b, c, d = string.byte(list[i], -4, -1)
      total = total + a + b * 256 + c * 65536 + d * 16777216
    end
  end
  return total
end

local k = #KEYS / 5
-- mirrors acquire.lua's clock block: 13 digits and '.' are a bound for the
-- server's clock, past which the reply is RLSTEP with nothing written.
local stamp = ARGV[1]
local most = false
if #stamp == 14 then
  most, stamp = stamp, ''
end
local clientClock = stamp ~= ''
if stamp == '' then
  local t = redis.call('TIME')
  stamp = t[1] .. string.sub('00000' .. t[2], -6, -4)
end
local now = stamp + 0
if most and stamp > most then
  return redis.error_reply('RLSTEP the server clock read ' .. stamp .. ' ms, past ' .. most .. ': a step ahead')
end
local single, strict = ARGV[3] == '0', ARGV[3] == '2'
local w = {}
for p = 1, k do
  w[p] = tonumber(ARGV[3 + p])
end
local first = 4 + k -- the first request's permits
local rate, interval, keep, vkey, pkey = {}, {}, {}, {}, {}
local value, changed, nold = {}, {}, {}
local lost = {} -- per part: permits whose records are gone (acquire.lua)
local held = {} -- per part: the index in its expired records of the probe record held (lib.lua), or false

-- Read and settle every part (acquire.lua's first block, per part).
for p = 1, k do
  local base = (p - 1) * 5
  local c = redis.call('HMGET', KEYS[base + 1], 'rate', 'interval', 'type', 'keepAliveTime')
  if not (c[1] and c[2] and c[3]) then
    fail('RLNOTINIT', p, 'RateLimiter is not initialized')
  end
  if c[3] == '0' then
    vkey[p], pkey[p] = KEYS[base + 2], KEYS[base + 4]
  elseif c[3] == '1' then
    vkey[p], pkey[p] = KEYS[base + 3], KEYS[base + 5]
  else
    fail('RLSTATE', p, 'unknown type ' .. c[3])
  end
  if vkey[p] == KEYS[base + 1] then
    fail('RLMODE', p, 'the keys sent are those of the other mode')
  end
  local stored = redis.call('GET', vkey[p])
  if not string.find((stored or '') .. c[1] .. c[2] .. (c[4] or ''), '^%-?%d+$') then
    fail('RLSTATE', p, 'config or value fields are not decimal integers')
  end
  local r, iv, kp = tonumber(c[1]), tonumber(c[2]), tonumber(c[4] or '0')
  local v = tonumber(stored or c[1])
  if not (r and iv and kp and v) or r < 1 or iv < 1 or r > MAX or iv > MAXMS or kp > MAXMS or v > MAX or v < -MAX then
    fail('RLSTATE', p, 'a field is empty, rate or interval is below 1, or a field is beyond 2^53-1 (interval and keep-alive 9223372036854 ms)')
  end
  if single and tonumber(ARGV[first]) * w[p] > r then
    fail('RLEXCEED', p, 'Requested permits amount cannot exceed defined rate')
  end
  rate[p], interval[p], keep[p] = r, iv, kp
  local cutoff = now - iv
  local old = redis.call('ZRANGEBYSCORE', pkey[p], '-inf', cutoff, 'LIMIT', '0', EXPIRE_CHUNK)
  local released = sum(old, p)
  held[p] = false
  for i = 1, #old do
    if old[i] == PROBE_B or old[i] == PROBE_L or old[i] == PROBE_F then
      local s = redis.call('ZSCORE', pkey[p], old[i])
      if s and s + 0 > cutoff - PROBE_HOLD then
        held[p], released = i, released - 1
      end
      break
    end
  end
  changed[p] = not stored
  if not stored or v + released > r then
    local live = redis.call('ZRANGEBYSCORE', pkey[p], string.format('(%d', cutoff), '+inf', 'LIMIT', 0, RECOUNT_MAX + 1)
    local used = sum(live, p)
    if #live > RECOUNT_MAX then
      v = 0
    elseif not stored and #live == 0 and #old == 0 and (EVICTS == 'allkeys' or (EVICTS == 'volatile' and kp > 0)) then
      lost[p] = math.min(r, 4294967295) -- as in acquire.lua: the window starts full
      v = r - lost[p]
    else
      v = r - used
    end
    changed[p] = true
  elseif #old > (held[p] and 1 or 0) then
    v = v + released
    changed[p] = true
  end
  value[p], nold[p] = v, #old
end

-- The j-th oldest record in part p's window ({member, score}, {} when
-- there is none), read at most once per call.
local window = {}
local function record(p, j)
  window[p] = window[p] or {}
  local r = window[p][j]
  if not r then
    local at = nold[p] + j - 1
    r = redis.call('ZRANGE', pkey[p], at, at, 'WITHSCORES')
    window[p][j] = r
  end
  return r
end

-- The ms until part p's records free need permits, as acquire.lua finds
-- it: at least 2, at most 2^53-1.
local function hint(p, need)
  local freed, at = 0, now
  for j = 1, HINT_WALK do
    local r = record(p, j)
    if not r[1] then
      at = now
      break
    end
    if r[1] ~= PROBE_B and r[1] ~= PROBE_L and r[1] ~= PROBE_F then -- acquire.lua: no hint waits for it
      if #r[1] >= 4 then
        local a, b, c, d = string.byte(r[1], -4, -1)
        freed = freed + a + b * 256 + c * 65536 + d * 16777216
      end
      at = tonumber(r[2])
      if freed >= need then
        break
      end
    end
  end
  local h = 3 + interval[p] - (now - at)
  if h > MAX then
    h = MAX
  elseif h < 2 then
    h = 2
  end
  return h
end

local total, stop, out, binds, each = 0, false, {}, {}, {}
local granted, left, h = false, 0, 0
local sbind = 0 -- the binding part of the last request (form '0' has one)
for i = first, #ARGV do
  local n = tonumber(ARGV[i])
  local bind = 0
  local ph = {} -- each part's hint (0: it has its permits)
  granted, h = false, 0
  for p = k, 1, -1 do
    ph[p] = 0
    if n * w[p] > rate[p] then
      bind = p
    end
  end
  if bind == 0 then
    local short = false
    for p = 1, k do
      if value[p] < n * w[p] and total == 0 and not lost[p] and not record(p, 1)[1] then
        -- Nothing outstanding in this part, yet its value says permits are
        -- out: its records are gone. A record stamped now holds them (as
        -- acquire.lua), so that they come back an interval from now.
        lost[p] = math.min(rate[p] - math.max(value[p], 0), 4294967295)
        value[p], changed[p] = rate[p] - lost[p], true
      end
      short = short or value[p] < n * w[p]
    end
    if not short and not stop then
      granted, total = true, total + n
      for p = 1, k do
        value[p] = value[p] - n * w[p]
      end
    else
      h = 2
      for p = 1, k do
        if value[p] < n * w[p] then
          ph[p] = hint(p, n * w[p] - value[p])
          if ph[p] > h or bind == 0 then
            h, bind = math.max(h, ph[p]), p
          end
        end
      end
      stop = strict
    end
  end
  left = value[1]
  for p = 2, k do
    left = math.min(left, value[p])
  end
  if bind == 0 then
    local fewest
    for p = 1, k do
      local more = math.floor(value[p] / w[p])
      if not fewest or more < fewest then
        fewest, bind = more, p
      end
    end
  end
  sbind = bind
  if not single then
    out[#out + 1], out[#out + 2], out[#out + 3] = granted and 1 or 0, left, h
    binds[#binds + 1] = bind
    for p = 1, k do
      each[#each + 1], each[#each + 2] = value[p], ph[p]
    end
  end
end

-- Collisions are checked in every part before the first write: a
-- collision leaves everything as it was.
local prefix = ARGV[2]
if single then
  prefix = string.sub(prefix, 1, -5)
end
local members = {}
for p = 1, k do
  members[p] = prefix .. struct.pack('<I', total * w[p])
end
-- Each part's stamp: mirrors acquire.lua's rule for the client's clock.
local stamps = {}
for p = 1, k do
  stamps[p] = stamp
  if (total > 0 or (lost[p] and lost[p] > 0)) and clientClock then
    local last = redis.call('ZRANGE', pkey[p], '-1', '-1', 'WITHSCORES')
    if last[2] and last[2] - now > 0 and last[2] - now <= interval[p] then
      stamps[p] = last[2]
    end
  end
end
-- Every read comes before the first write: each part's config TTL
-- (nothing below writes a config without keep-alive) and, for the table
-- reply, each part's oldest record in the window.
local ttl = {}
for p = 1, k do
  ttl[p] = 0
  if keep[p] == 0 then
    ttl[p] = redis.call('PTTL', KEYS[(p - 1) * 5 + 1])
  end
  if not single then
    record(p, 1)
  end
end

-- As acquire.lua: every command run after the first write is checked
-- here first, on its key (redis.acl_check_cmd, Redis 7.0 and later and
-- Valkey), so that an ACL changed since the Client's probe refuses the
-- call with nothing written.
local acl = redis.acl_check_cmd
if acl then
  local w, deny = total > 0, nil
  local function need(cmd, key)
    if not deny and w and not acl(cmd, key, '0') then
      deny = string.lower(cmd)
    end
    w = true
  end
  if total > 0 then
    for p = 2, k do
      need('ZADD', pkey[p])
    end
  end
  for p = 1, k do
    if lost[p] and lost[p] > 0 then
      need('ZADD', pkey[p])
    end
    if nold[p] > (held[p] and 1 or 0) then
      need('ZREMRANGEBYRANK', pkey[p])
    end
    if changed[p] then
      need('SET', vkey[p])
    elseif total > 0 then
      need('DECRBY', vkey[p])
    end
    if keep[p] > 0 then
      need('PEXPIRE', KEYS[(p - 1) * 5 + 1])
      need('PEXPIRE', vkey[p])
      need('PEXPIRE', pkey[p])
    elseif ttl[p] > 0 then
      need('PEXPIRE', vkey[p])
      need('PEXPIRE', pkey[p])
    end
  end
  if deny then
    error({err = "NOPERM this user has no permissions to run the '" .. deny ..
      "' command (checked before the script's first write: nothing was written)"})
  end
end

if total > 0 then
  for p = 2, k do
    if redis.call('ZSCORE', pkey[p], members[p]) then
      return -1
    end
  end
  if redis.call('ZADD', pkey[1], 'NX', stamps[1], members[1]) == 0 then
    return -1
  end
  for p = 2, k do
    redis.call('ZADD', pkey[p], stamps[p], members[p])
  end
end
for p = 1, k do
  if lost[p] and lost[p] > 0 then
    -- acquire.lua's record of the lost permits.
    local pre = string.sub(prefix, 1, -2) .. string.char((string.byte(prefix, -1) + 128) % 256)
    redis.call('ZADD', pkey[p], stamps[p], pre .. struct.pack('<I', lost[p]))
  end
  local hk = held[p]
  if hk then
    -- lib.lua's unrecord(): all but the held probe record
    if hk < nold[p] then
      redis.call('ZREMRANGEBYRANK', pkey[p], hk, nold[p] - 1)
    end
    if hk > 1 then
      redis.call('ZREMRANGEBYRANK', pkey[p], 0, hk - 2)
    end
  elseif nold[p] > 0 then
    redis.call('ZREMRANGEBYRANK', pkey[p], 0, nold[p] - 1)
  end
  if changed[p] then
    redis.call('SET', vkey[p], value[p])
  elseif total > 0 then
    redis.call('DECRBY', vkey[p], total * w[p])
  end
  if keep[p] > 0 then
    redis.call('PEXPIRE', KEYS[(p - 1) * 5 + 1], keep[p])
    redis.call('PEXPIRE', vkey[p], keep[p])
    redis.call('PEXPIRE', pkey[p], keep[p])
  elseif ttl[p] > 0 then
    redis.call('PEXPIRE', vkey[p], ttl[p])
    redis.call('PEXPIRE', pkey[p], ttl[p])
  end
end

if single then
  if granted then
    return left
  end
  if sbind > 0 and h > interval[sbind] + 3 then
    h = interval[sbind] + 3
  end
  return -h
end
local parts = {}
for p = 1, k do
  local first, reset = record(p, 1), 0
  if first[1] then
    reset = math.max(0, math.min(interval[p], interval[p] - (now - tonumber(first[2]))))
  elseif total > 0 or (lost[p] or 0) > 0 then
    reset = interval[p]
  end
  parts[#parts + 1], parts[#parts + 2], parts[#parts + 3] = rate[p], interval[p], reset
end
for i = 1, #each do
  parts[#parts + 1] = each[i]
end
return {k, parts, binds, unpack(out)}
