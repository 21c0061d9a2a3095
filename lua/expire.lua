-- expire / expireAt / clearExpire over all five keys. ARGV: command
-- (PEXPIRE, PEXPIREAT or PERSIST), then its time and optional condition
-- (NX, XX, GT, LT). Returns 1 when any key changed. The condition is
-- decided here, from each key's PTTL, rather than passed to PEXPIRE:
-- Redis 6.2's PEXPIRE takes no condition. As in Redis 7, a key without a
-- TTL counts as expiring never for GT and LT.
local cond = ARGV[3]
local now
if cond and ARGV[1] == 'PEXPIREAT' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local changed = 0
for i = 1, #KEYS do
  local r = 0
  if ARGV[1] == 'PERSIST' then
    r = redis.call('PERSIST', KEYS[i])
  elseif not cond then
    r = redis.call(ARGV[1], KEYS[i], ARGV[2])
  else
    local ttl = redis.call('PTTL', KEYS[i])
    local go = false
    if ttl ~= -2 then
      local want = tonumber(ARGV[2])
      if now then
        want = want - now -- PEXPIREAT: compare what is left
      end
      if cond == 'NX' then
        go = ttl == -1
      elseif cond == 'XX' then
        go = ttl >= 0
      elseif cond == 'GT' then
        go = ttl >= 0 and want > ttl
      elseif cond == 'LT' then
        go = ttl == -1 or want < ttl
      end
    end
    if go then
      r = redis.call(ARGV[1], KEYS[i], ARGV[2])
    end
  end
  if r == 1 then
    changed = 1
  end
end
return changed
