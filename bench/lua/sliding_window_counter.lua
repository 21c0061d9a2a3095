-- Sliding window counter: the counters of the current and the previous
-- fixed window, the previous one weighted by how much of it the sliding
-- window still covers.
-- KEYS[1]  counter of the current window (floor(now / interval))
-- KEYS[2]  counter of the previous window
-- ARGV[1]  limit: grants per interval
-- ARGV[2]  interval in milliseconds
-- ARGV[3]  milliseconds elapsed in the current window (now mod interval)
-- Returns 1 (granted) or 0 (refused): granted when
-- previous * (interval - elapsed) / interval + current + 1 <= limit.
local limit = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local elapsed = tonumber(ARGV[3])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
if prev * (interval - elapsed) / interval + cur + 1 > limit then
  return 0
end
if redis.call('INCR', KEYS[1]) == 1 then
  -- the counter is read as the previous window during the next interval
  redis.call('PEXPIRE', KEYS[1], 2 * interval)
end
return 1
