-- Sliding log: one sorted-set entry per grant, scored by its time.
-- KEYS[1]  the log
-- ARGV[1]  limit: grants in any window of the interval
-- ARGV[2]  interval in milliseconds
-- ARGV[3]  now in milliseconds
-- ARGV[4]  a member unique to this request
-- Returns 1 (granted) or 0 (refused). Entries older than now - interval are
-- removed; a grant is recorded only if fewer than limit entries remain.
local limit = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - interval)
if redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], interval)
return 1
