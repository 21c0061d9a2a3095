-- expire / expireAt / clearExpire over all five keys. ARGV: command
-- (PEXPIRE, PEXPIREAT or PERSIST), then its time and optional condition
-- (NX, XX, GT, LT). Returns 1 when any key changed.
local changed = 0
for i = 1, #KEYS do
  local r
  if ARGV[1] == 'PERSIST' then
    r = redis.call('PERSIST', KEYS[i])
  elseif ARGV[3] then
    r = redis.call(ARGV[1], KEYS[i], ARGV[2], ARGV[3])
  else
    r = redis.call(ARGV[1], KEYS[i], ARGV[2])
  end
  if r == 1 then
    changed = 1
  end
end
return changed
