-- tryAcquire. ARGV: permits, now (ms), member (built by the client in the
-- fleet's member format). Returns {code, value}: code 0 when granted, -1
-- when the member collided with an existing one (nothing was added: retry
-- with a fresh member), otherwise the wait hint in ms; value is what is
-- left available.
local n = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local rate, interval, keep, valueKey, permitsKey = limiter()
if n > rate then
  fail('RLEXCEED', 'Requested permits amount cannot exceed defined rate')
end

local stored = read('GET', valueKey)
local value
local result = 0
if stored == false then
  value = rate
else
  local changed
  value, changed = expire(permitsKey, now - interval, whole(stored, 'value'), rate)
  if value < n then
    local oldest = read('ZRANGE', permitsKey, 0, 0, 'WITHSCORES')
    if oldest[2] then
      result = 3 + interval - (now - tonumber(oldest[2]))
    else
      -- Nothing is outstanding, yet the value says the permits are gone
      -- (the set expired or was deleted apart from the value). Nothing
      -- would ever give them back: start the window afresh.
      value = rate
      changed = true
    end
  end
  if result ~= 0 and changed then
    redis.call('SET', valueKey, value)
  end
end

if result == 0 then
  if redis.call('ZADD', permitsKey, 'NX', now, ARGV[3]) == 0 then
    result = -1
  else
    value = value - n
  end
  redis.call('SET', valueKey, value)
end
refresh(valueKey, permitsKey, keep)
return {result, value}
