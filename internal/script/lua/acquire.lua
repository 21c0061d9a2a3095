-- tryAcquire for one request or a batch of them, decided in order at one
-- clock reading, as if they had come one after another.
--
-- ARGV: now (ms), or '' for the server's clock (lib.lua, clock()), or
-- 13 digits and '.': the server's clock and the most it may read (a step,
-- below); the
-- permit record in the client's member format (for
-- reply form '0', the whole record; otherwise the record without its last
-- four bytes, which this script appends: the sum of the permits granted);
-- the reply form; then the permits of each request.
-- One record holds everything the call grants: Redisson sums the permits
-- of records, so its budget is the same as with one record per request
-- (docs/protocol.md, "Combined records").
--
-- KEYS: K1..K5 of docs/protocol.md, or K1, K2 and K4 alone while Go
-- takes the limiter for OVERALL, or K1..K5 with K2 and K4 given as K1
-- while Go takes it for PER_CLIENT: then the reply is -2, with nothing
-- written, when it is of the other mode (send all five). A call declares
-- only keys that exist: in a Cluster slot being migrated, Redis refuses
-- a script whose keys are partly missing (TRYAGAIN).
--
-- Reply form '0' (exactly one request; the cheap hot path): one integer,
-- the permits left (>= 0) on a grant, -1 when the record collided with an
-- existing one (nothing was granted: retry with a fresh prefix), otherwise
-- minus the wait hint in ms (at least 2), at most the interval and 3 ms
-- (a longer hint comes from records stamped ahead of this script's clock:
-- the caller asks again after an interval, and a local refusal never
-- outlasts one); RLEXCEED when the request exceeds the rate.
-- Reply form '2' is form '1' for queued waiters: after the first refusal,
-- every later request is refused too, so that no waiter takes permits
-- that one ahead of it is waiting for.
-- Forms '1:K' and '2:K' (K a decimal integer) are '1' and '2' holding K
-- permits free (see below).
-- Reply form '1': -1 on a collision, otherwise a table {rate, interval,
-- reset, then per request: granted (1, or 0, or 2 when refused only to
-- hold permits free), permits left after it, hint}.
-- reset is the ms until the oldest record in the window expires (0 when
-- none). A request over the rate is refused with hint 0 and changes
-- nothing; the caller reports ErrPermitsExceedRate.
--
-- This script stands alone (redis_scripts.go sends it without lib.lua): it is
-- the hot path, and every Lua call shows in Redis's work per call
-- (internal/compat instruction counts). The blocks marked "mirrors
-- lib.lua" implement the same rules as lib.lua's functions of that name;
-- state_test.go feeds the same states to both and expects the same budget.
-- Every check runs before the first write, and errors carry the prefixes
-- that errors.go maps.

-- Exact integers only: Lua numbers are doubles. Interval and keep-alive
-- at most MAXMS ms, the longest time.Duration (config.go, maxFieldMs).
local MAX, MAXMS = 9007199254740991, 9223372036854
-- Bounds on the work of one call (README, "Bounded work"): expired records
-- released per call, records read to recount a window, records read for a
-- wait hint.
local EXPIRE_CHUNK, RECOUNT_MAX, HINT_WALK = '1000', 10000, 16
-- Whether the server may evict the limiter's keys: false, 'allkeys' or
-- 'volatile' (keys with a TTL only). Go sends a copy with it set when
-- INFO says so (redis_eviction.go); the script text differs, not its arguments.
local EVICTS = false
-- mirrors lib.lua: the probe record in Bc0I, Lc0I and fI, and how long (ms)
-- past its expiry it stays with its permit out.
local PROBE_B, PROBE_L, PROBE_F = '\16GoRLprob\0\0\0\0\0\0\0\0\1\0\0\0', '\13\0\0\0\0\0\0\0GoRL70726f620\1\0\0\0', '\0\0\0\127\1\0\0\0'
local PROBE_HOLD = 110

-- mirrors lib.lua: limiter() and the first half of settle()
-- Redis's command functions as locals: looking redis.call up at every
-- command cost Redis more (callgrind: docs/performance.md, "Many limiters").
-- (many.go's scripts make them once for all their calls: lua/many_clock.lua.)
local rcall, rpcall = redis.call, redis.pcall
local c = rcall('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
if not (c[1] and c[2] and c[3]) then
  return redis.error_reply('RLNOTINIT RateLimiter is not initialized')
end
local valueKey, permitsKey = KEYS[2], KEYS[4]
if #KEYS == 3 then
  -- Three keys (config, value, permits): Go takes the limiter for OVERALL
  -- until told otherwise; each key it need not send saves Redis work
  -- (docs/performance.md).
  permitsKey = KEYS[3]
  if c[3] == '1' then
    return -2 -- PER_CLIENT: nothing written, send all five keys
  end
elseif c[3] == '1' then
  valueKey, permitsKey = KEYS[3], KEYS[5]
end
if c[3] ~= '0' and c[3] ~= '1' then
  return redis.error_reply('RLSTATE unknown type ' .. c[3])
end
if valueKey == KEYS[1] then
  -- Five keys with K2 and K4 given as K1 (Go takes the limiter for
  -- PER_CLIENT) and the limiter is OVERALL: nothing written, send all five.
  return -2
end
local stored = rcall('GET', valueKey)
-- One match for every field (cheaper than one each): decimal integers
-- only, as Config() reads them (tonumber alone would take 0x10 or 1e3),
-- none empty. Only the value, first, may have a sign; a negative rate
-- fails below. Matched, they convert with + 0 (one strtod each; tonumber
-- makes two).
if not string.find((stored or c[1]) .. ' ' .. c[1] .. ' ' .. c[2] .. ' ' .. (c[4] or '0'), '^%-?%d+ %d+ %d+ %d+$') then
  return redis.error_reply('RLSTATE config or value fields are not decimal integers')
end
local rate, interval, keep, value = c[1] + 0, c[2] + 0, 0, (stored or c[1]) + 0
if c[4] and c[4] ~= '0' then
  keep = c[4] + 0
end
if rate < 1 or interval < 1 or rate > MAX or interval > MAXMS or keep > MAXMS or value > MAX or value < -MAX then
  return redis.error_reply('RLSTATE a field is empty, rate or interval is below 1, or a field is beyond 2^53-1 (interval and keep-alive 9223372036854 ms)')
end
local form = ARGV[3]
local single = form == '0'
-- Forms '1:K' and '2:K' are forms '1' and '2' that grant a request only
-- while K permits stay free after it (a probe window's hold, fairness_probe.go);
-- a request refused for that alone reads 2 in its granted field.
-- Forms '1p', '2p', '1p:K' and '2p:K' may write the probe record (below).
local hold, probe = 0, false
if not single and #form > 1 then
  probe = string.byte(form, 2) == 112
  local k = probe and 4 or 3
  if #form >= k then
    hold = string.sub(form, k) + 0
  end
  form = string.sub(form, 1, 1)
end
-- (Most calls ask for one permit: comparing the string costs less than
-- converting it.)
local one = single and (ARGV[4] == '1' and 1 or ARGV[4] + 0)
if one and one > rate then
  return redis.error_reply('RLEXCEED Requested permits amount cannot exceed defined rate')
end
-- mirrors lib.lua: clock(), and takes 13 digits and a '.' for the
-- server's clock and a bound in ms that it must not pass (compared as
-- strings: the server's ms are 13 digits too until the year 2286, and a
-- string compare costs less than a conversion): past it, the clock
-- stepped ahead
-- since Go last read it (clockstep.go), and the reply is the error
-- RLSTEP with nothing written (Go fills the window, then asks again).
local stamp = ARGV[1]
local most = false
if #stamp == 14 then
  most, stamp = stamp, ''
end
local clientClock = stamp ~= ''
local now
if stamp == '' then
  -- (many.go gives a script deciding several calls serverNow instead of
  -- these two lines, which also gives now: lua/many_clock.lua.)
  local t = rcall('TIME')
  stamp = t[1] .. string.sub('00000' .. t[2], -6, -4)
end
now = now or stamp + 0
if most and stamp > most then
  return redis.error_reply('RLSTEP the server clock read ' .. stamp .. ' ms, past ' .. most .. ': a step ahead')
end
local cutoff = string.format('%d', now - interval)

-- mirrors lib.lua: the second half of settle()
local old = rcall('ZRANGEBYSCORE', permitsKey, '-inf', cutoff, 'LIMIT', '0', EXPIRE_CHUNK)
local released, pk = 0, nil
for i = 1, #old do
  -- The permit count: the last four bytes, little-endian, in every
  -- Redisson member format; a record shorter than that holds none.
  if #old[i] >= 4 then
    local a, b, c, d = string.byte(old[i], -4, -1)
    released = released + a + b * 256 + c * 65536 + d * 16777216
  end
  if old[i] == PROBE_B or old[i] == PROBE_L or old[i] == PROBE_F then
    pk = i
  end
end
-- mirrors lib.lua: probeHeld(). The probe record among the expired ones
-- (old[pk]) stays, its permit out, while held. pm: the probe record in
-- this Client's format when the form lets this call write it (ARGV[2] is
-- an fI record's prefix when 4 bytes long, a Bc0I one's when its second
-- byte is the mark's 'G'), and ps its score (false: there is none).
local held, pm, ps = false, nil, false
if probe then
  pm = PROBE_L
  if #ARGV[2] == 4 then
    pm = PROBE_F
  elseif string.byte(ARGV[2], 2) == 71 then
    pm = PROBE_B
  end
end
if pk then
  local s = rcall('ZSCORE', permitsKey, old[pk])
  held = s and s + 0 > now - interval - PROBE_HOLD
  if held then
    released = released - 1
  end
  if old[pk] == pm then
    ps = s
  end
end
if pm and not (pk and old[pk] == pm) then
  ps = rcall('ZSCORE', permitsKey, pm)
end
-- nfree: the expired records this call removes.
local nfree = #old
if held then
  nfree = nfree - 1
end
-- changed: the value key is set anew (SET); otherwise it goes down by
-- what the call grants less what its settle freed (one DECRBY, or none
-- when they cancel, as they do on a busy limiter far from its rate).
local changed, lost, freed = not stored, 0, 0
if not stored or value + released > rate then
  -- The value key is gone while records remain (an evicting policy), or
  -- permits came back that the records still hold (a Redisson release or
  -- availablePermits): count the window's records instead.
  local live = rcall('ZRANGEBYSCORE', permitsKey, '(' .. cutoff, '+inf', 'LIMIT', 0, RECOUNT_MAX + 1)
  local used = 0
  for i = 1, #live do
    if #live[i] >= 4 then
      local a, b, c, d = string.byte(live[i], -4, -1)
      used = used + a + b * 256 + c * 65536 + d * 16777216
    end
  end
  if #live > RECOUNT_MAX then
    -- Too many to count in one call: grant nothing until records expire.
    value = 0
  elseif not stored and #live == 0 and #old == 0 and (EVICTS == 'allkeys' or (EVICTS == 'volatile' and keep > 0)) then
    -- No value and no records while the config stays, on a server that
    -- may evict them: they may have been evicted with permits out, and
    -- nothing tells this from a limiter never used. The window starts
    -- full (a record of the rate, written below), so eviction never
    -- grants more than the rate.
    lost = math.min(rate, 4294967295) -- a record holds 32 bits
    value = rate - lost
  else
    value = rate - used
  end
  changed = true
elseif nfree > 0 then
  value, freed = value + released, released
end

-- Decide each request in order. On the first refusal (or at once for a
-- table reply, which carries the reset time) the window's oldest record is
-- read (first: {member, score}, {} when the window is empty); a hint reads
-- further records one at a time, at most HINT_WALK (window[k] is the k-th
-- oldest). No Lua function or table is made on the hot path: each one
-- shows in Redis's work per call.
local strict, stop = form == '2', false
local total, out, first, window = 0, nil, nil, nil
local granted, h = false, 0
if not single then
  out = {}
end
for i = 4, #ARGV do
  local n = one or ARGV[i] + 0
  if not first and (value < n or not single) then
    -- Redis formats a Lua number argument with %.17g (about 2,000
    -- instructions): a string is cheaper, and '%d' formats one for less.
    local from = '0'
    if #old > 0 then
      from = string.format('%d', #old)
    end
    first = rcall('ZRANGE', permitsKey, from, from, 'WITHSCORES')
  end
  if value < n and total == 0 and lost == 0 and not first[1] then
    -- Nothing is outstanding, yet the value says permits are out: the
    -- records are gone (evicted, or expired or deleted apart from the
    -- value), and nothing would ever give those permits back. They were
    -- granted within the last interval at most: a record stamped now
    -- holds them (written below), so they come back an interval from now
    -- and losing the records never grants more than the rate.
    lost = math.min(rate - math.max(value, 0), 4294967295) -- a record holds 32 bits
    value, changed = rate - lost, true
  end
  granted, h = false, 0
  local held = false
  if n <= rate and value - n >= hold and not stop then
    value, total, granted = value - n, total + n, true
  elseif n <= rate then
    held = value >= n and not stop
    -- The ms until enough records expire to free the permits missing, at
    -- least 2 and at most 2^53-1, plus Redisson's 3 ms: a record stamped in
    -- the future of this clock is waited for until this clock sees it
    -- expire (a hint never promises permits sooner than they can come).
    -- Permits this call grants are freed last, an interval from now.
    local need, freed, at = n - value, 0, now
    for k = 1, HINT_WALK do
      local r = first
      if k > 1 then
        window = window or {}
        r = window[k]
        if not r then
          local at = string.format('%d', #old + k - 1)
          r = rcall('ZRANGE', permitsKey, at, at, 'WITHSCORES')
          window[k] = r
        end
      end
      if not r[1] then
        at = now
        break
      end
      -- The probe record's permit is for Redisson's waiters (lib.lua):
      -- no hint waits for it, so no Go waiter wakes when it frees.
      if r[1] ~= PROBE_B and r[1] ~= PROBE_L and r[1] ~= PROBE_F then
        if #r[1] >= 4 then
          local a, b, c, d = string.byte(r[1], -4, -1)
          freed = freed + a + b * 256 + c * 65536 + d * 16777216
        end
        at = r[2] + 0
        if freed >= need then
          break
        end
      end
    end
    h = 3 + interval - (now - at)
    if h > MAX then
      h = MAX
    elseif h < 2 then
      h = 2
    end
    stop = strict
  end
  if not single then
    out[#out + 1], out[#out + 2], out[#out + 3] = granted and 1 or (held and 2 or 0), value, h
  end
end

-- The probe record (docs/fairness.md, "The probe record"): a call whose
-- form lets it, granting at least one permit while no probe record is in
-- place (or the one in place is removed by this call), writes one of its
-- permits as the probe record, the rest in its own record (mt permits).
local pw = pm and total > 0 and (not ps or (pk and old[pk] == pm and not held))
local mt = total
if pw then
  mt = total - 1
end

-- On the client's clock (ARGV[1] not empty), a record is never stamped
-- before the newest of the window, unless that one is more than an
-- interval ahead of now (a clock far ahead must not hold the limiter):
-- a call held by a stall after it read its clock cannot then free its
-- permits before those of calls that ran first. The server's clock is
-- read when the script runs, so its stamp is never stale.
-- acquire_all.lua mirrors this block.
if (total > 0 or lost > 0) and clientClock then
  local last = rcall('ZRANGE', permitsKey, '-1', '-1', 'WITHSCORES')
  if last[2] and last[2] - now > 0 and last[2] - now <= interval then
    stamp = last[2]
  end
end

-- The config's TTL, read before the first write (nothing below writes
-- KEYS[1] without keep-alive).
local ttl = 0
if keep == 0 then
  ttl = rcall('PTTL', KEYS[1])
end

-- Redis does not roll a script back: a command the ACL refuses after the
-- first write would leave that write alone (an ACL changed since the
-- Client's probe, permissions.go). Two paths write the grant's record and
-- one command more, on a limiter without a TTL or keep-alive: the plain
-- grant (then DECRBY: it frees no expired record) and the settling grant
-- (then ZREMRANGEBYRANK of the expired records it frees, which held as
-- many permits as it grants, so the value stays). There a refusal of that
-- command takes the record back (below), which costs nothing while it is
-- allowed. On every other path each command run after the first write is
-- checked here first, on its key, with redis.acl_check_cmd (Redis 7.0 and
-- later, Valkey; Redis 6.2 lacks it and relies on the probe:
-- docs/operations.md).
-- w: a write runs before the next one. The second ZADD (lost permits)
-- needs no check: the first, on the same key, ran.
local alone = not changed and lost == 0 and keep == 0 and ttl <= 0 and not pw
local plain = nfree == 0 and alone
local settling = nfree > 0 and not held and total == freed and alone
local acl = not plain and not settling and redis.acl_check_cmd
if acl then
  local w, deny = mt > 0 or lost > 0, nil
  if nfree > 0 then
    if w and not acl('ZREMRANGEBYRANK', permitsKey) then
      deny = 'zremrangebyrank'
    end
    w = true
  end
  if pw and not deny then
    if w and not acl('ZADD', permitsKey) then
      deny = 'zadd'
    end
    w = true
  end
  local vc = changed and 'SET' or (total ~= freed and 'DECRBY')
  if vc and not deny then
    if w and not acl(vc, valueKey) then
      deny = string.lower(vc)
    end
    w = true
  end
  if not deny and keep > 0 then
    if (w and not acl('PEXPIRE', KEYS[1])) or not acl('PEXPIRE', valueKey) or not acl('PEXPIRE', permitsKey) then
      deny = 'pexpire'
    end
  elseif not deny and ttl > 0 then
    if (w and not acl('PEXPIRE', valueKey)) or not acl('PEXPIRE', permitsKey) then
      deny = 'pexpire'
    end
  end
  if deny then
    return redis.error_reply("NOPERM this user has no permissions to run the '" .. deny .. "' command (checked before the script's first write: nothing was written)")
  end
end

-- The first write: a collision leaves everything as it was.
local member = ARGV[2]
if not single then
  member = member .. struct.pack('<I', mt)
end
if mt > 0 and rcall('ZADD', permitsKey, 'NX', stamp, member) == 0 then
  return -1
end
if lost > 0 then
  -- The record of the lost permits: this call's prefix with the top bit of
  -- its last byte flipped (a random byte, digit or float sign in every
  -- member format), so that it never is this call's grant record.
  local p = ARGV[2]
  if single then
    p = string.sub(p, 1, -5)
  end
  p = string.sub(p, 1, -2) .. string.char((string.byte(p, -1) + 128) % 256)
  rcall('ZADD', permitsKey, stamp, p .. struct.pack('<I', lost))
end
if held then
  -- mirrors lib.lua: unrecord(), the later ones first so that ranks hold
  if pk < #old then
    rcall('ZREMRANGEBYRANK', permitsKey, string.format('%d', pk), string.format('%d', #old - 1))
  end
  if pk > 1 then
    rcall('ZREMRANGEBYRANK', permitsKey, '0', string.format('%d', pk - 2))
  end
elseif #old > 0 then
  local last = '0'
  if #old > 1 then
    last = #old <= 10 and string.sub('0123456789', #old, #old) or string.format('%d', #old - 1)
  end
  if not settling then
    rcall('ZREMRANGEBYRANK', permitsKey, '0', last)
  else
    local r = rpcall('ZREMRANGEBYRANK', permitsKey, '0', last)
    if r ~= #old then
      -- Refused (the ACL changed since the probe; otherwise it removed
      -- #old): the record goes, as after a refused DECRBY below.
      if mt > 0 then
        rpcall('ZREM', permitsKey, member)
      end
      return r
    end
  end
end
if pw then
  rcall('ZADD', permitsKey, stamp, pm)
end
if changed then
  rcall('SET', valueKey, string.format('%d', value))
elseif total > 0 and plain then
  local r = rpcall('DECRBY', valueKey, single and ARGV[4] or total)
  if r ~= value then
    -- (DECRBY's reply is value, as this script counted it, unless it was
    -- refused: an error table. A comparison costs less than type().)
    -- Refused (the ACL changed since the probe): the record goes, and the
    -- call changed nothing, unless ZREM is refused too (docs/operations.md).
    rpcall('ZREM', permitsKey, member)
    return r
  end
elseif total ~= freed then
  rcall('DECRBY', valueKey, (single and freed == 0) and ARGV[4] or string.format('%d', total - freed))
end

-- mirrors lib.lua: refresh()
if keep > 0 then
  -- The field as read, unless it has leading zeros (PEXPIRE refuses them).
  local ka = c[4]
  if string.byte(ka) == 48 then
    ka = string.format('%d', keep)
  end
  rcall('PEXPIRE', KEYS[1], ka)
  rcall('PEXPIRE', valueKey, ka)
  rcall('PEXPIRE', permitsKey, ka)
elseif ttl > 0 then
  ttl = string.format('%d', ttl)
  rcall('PEXPIRE', valueKey, ttl)
  rcall('PEXPIRE', permitsKey, ttl)
end

if single then
  if granted then
    return value
  end
  if h > interval + 3 then
    h = interval + 3
  end
  return -h
end
local reset = 0
if first[1] then
  reset = math.max(0, math.min(interval, interval - (now - first[2])))
elseif total > 0 or lost > 0 then
  reset = interval
end
if probe then
  -- The probe record after this call, and the ms until it expires: 1 when
  -- this call found it and left it (at most PROBE_HOLD below 0 while
  -- held), 2 when it wrote it anew in place of the one it settled, 3 when
  -- it wrote it and found none, 0 (and 0 ms) when there is none.
  local st, until_ = 0, 0
  if pw then
    st, until_ = ps and 2 or 3, interval
  elseif ps then
    st, until_ = 1, ps + interval - now
  end
  out[#out + 1], out[#out + 2] = st, until_
end
return {rate, interval, reset, unpack(out)}
