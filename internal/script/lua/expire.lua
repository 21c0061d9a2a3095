-- expire / expireAt / clearExpire over all five keys. ARGV: command
-- (PEXPIRE, PEXPIREAT or PERSIST), then its time and optional condition
-- (NX, XX, GT, LT). Returns 1 when any key changed. The condition is
-- decided here, from each key's PTTL, rather than passed to PEXPIRE:
-- Redis 6.2's PEXPIRE takes no condition. As in Redis 7, a key without a
-- TTL counts as expiring never for GT and LT. Every read comes before the
-- first write (one command on every key), so that a refusal leaves
-- nothing changed.
local cond = ARGV[3]
local go = {}
if cond and ARGV[1] ~= 'PERSIST' then
  local want = tonumber(ARGV[2])
  if ARGV[1] == 'PEXPIREAT' then
    local t = redis.call('TIME') -- compare what is left
    want = want - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  for i = 1, #KEYS do
    local ttl = redis.call('PTTL', KEYS[i])
    go[i] = ttl ~= -2 and ((cond == 'NX' and ttl == -1) or (cond == 'XX' and ttl >= 0) or
      (cond == 'GT' and ttl >= 0 and want > ttl) or (cond == 'LT' and (ttl == -1 or want < ttl)))
  end
end
-- Redis does not roll a script back: the command is checked on every key
-- it will run on after the first (redis.acl_check_cmd: Redis 7.0 and
-- later, Valkey), so that an ACL refusal leaves nothing changed (lib.lua,
-- allow). Redis 6.2 lacks it: there the keys before a refused one keep
-- the change.
if redis.acl_check_cmd then
  local w = false
  for i = 1, #KEYS do
    if not cond or ARGV[1] == 'PERSIST' or go[i] then
      if w and not redis.acl_check_cmd(ARGV[1], KEYS[i], ARGV[2] or '0') then
        return redis.error_reply("NOPERM this user has no permissions to run the '" .. string.lower(ARGV[1]) ..
          "' command (checked before the script's first write: nothing was written)")
      end
      w = true
    end
  end
end
local changed = 0
for i = 1, #KEYS do
  local r = 0
  if ARGV[1] == 'PERSIST' then
    r = redis.call('PERSIST', KEYS[i])
  elseif not cond then
    r = redis.call(ARGV[1], KEYS[i], ARGV[2])
  elseif go[i] then
    r = redis.call(ARGV[1], KEYS[i], ARGV[2])
  end
  if r == 1 then
    changed = 1
  end
end
return changed
