-- availablePermits. ARGV: now (ms). Returns the permits available now,
-- releasing expired records first.
local now = tonumber(ARGV[1])
local rate, interval, keep, valueKey, permitsKey = limiter()
local stored = read('GET', valueKey)
if stored == false then
  redis.call('SET', valueKey, rate)
  -- Redisson leaves this key without a TTL, so it outlives a config hash
  -- that expires; give it the hash's.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', valueKey, ttl)
  end
  return rate
end
local value, changed = expire(permitsKey, now - interval, whole(stored, 'value'), rate)
if changed then
  redis.call('SET', valueKey, value)
end
return value
