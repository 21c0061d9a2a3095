-- availablePermits. ARGV: now (ms, or '' for the server's clock). Returns the permits available now,
-- never below 0, after releasing expired records (settle in lib.lua), and
-- stores the value when it changed.
local now = clock(ARGV[1])
local rate, interval, keep, valueKey, permitsKey = limiter()
allow({'SET', valueKey, 'PTTL', KEYS[1], 'PTTL', valueKey, 'PEXPIRE', valueKey})
local value, changed = settle(valueKey, permitsKey, now, interval, rate)
if changed then
  redis.call('SET', valueKey, value)
  -- Redisson leaves the value key without a TTL when it creates it here, so
  -- it would outlive a config hash that expires; give it the hash's.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 and redis.call('PTTL', valueKey) < 0 then
    redis.call('PEXPIRE', valueKey, ttl)
  end
end
return math.max(0, value)
