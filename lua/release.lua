-- release. ARGV: permits (> 0). Gives permits back to the value, never
-- past the rate; the permit records stay until they expire.
local rate, interval, keep, valueKey, permitsKey = limiter()
local stored = read('GET', valueKey)
local value = rate
if stored ~= false then
  value = whole(stored, 'value')
end
redis.call('SET', valueKey, math.min(rate, value + tonumber(ARGV[1])))
refresh(valueKey, permitsKey, keep)
return 0
