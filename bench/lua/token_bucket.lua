-- Token bucket: a hash {tokens, ts} refilled lazily at capacity/interval
-- tokens per millisecond, up to capacity.
-- KEYS[1]  the bucket
-- ARGV[1]  capacity (also the tokens added per interval)
-- ARGV[2]  interval in milliseconds
-- ARGV[3]  now in milliseconds
-- Returns 1 (granted) or 0 (refused). A missing bucket is full. A refusal
-- writes nothing: the refill is a function of the stored ts, so it is the
-- same when computed later.
local cap = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = cap
  ts = now
end
if now > ts then
  tokens = math.min(cap, tokens + (now - ts) * cap / interval)
  ts = now
end
if tokens < 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ts', tostring(ts))
-- an untouched bucket is full again after one interval
redis.call('PEXPIRE', KEYS[1], interval)
return 1
