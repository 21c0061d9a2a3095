-- release on several limiters at once (a Composite's Release): one
-- script call, so that every part gives back or, on an error, none does.
-- KEYS: K1..K5 of docs/protocol.md for each part, part after part.
-- ARGV: now (ms, or '' for the server's clock), the releasing Client's
-- own-record mark and its 1-based offset ('' and 0: every record), then
-- the permits to give back to each part, in order (each > 0: Go sends
-- only the parts it releases). Each part gives back as release.lua does
-- (giveback.lua, giveBack). Returns the permits given back to each part.
--
-- Every check that can refuse the call (a part not configured, a field
-- or key the protocol does not expect) runs for every part before the
-- first write: a refusal writes nothing.
local now = clock(ARGV[1])
local k = #KEYS / 5
local cfg = {}
for p = 1, k do
  -- Errors carry the part (1-based) after their prefix, as acquire_all.lua's.
  local ok, e = pcall(function()
    local rate, interval, keep, valueKey, permitsKey = limiter((p - 1) * 5)
    local stored = read('GET', valueKey)
    if stored then
      whole(stored, 'value', -MAX)
    end
    read('ZRANGEBYSCORE', permitsKey, '-inf', '+inf', 'LIMIT', 0, 1) -- WRONGTYPE before any write
    -- Every part's commands, the later parts' reads too, before the first
    -- write (lib.lua, allow).
    allow(refreshing({'GET', valueKey, 'ZRANGEBYSCORE', permitsKey, 'ZREMRANGEBYRANK', permitsKey,
      'ZREVRANGEBYSCORE', permitsKey, 'ZSCORE', permitsKey, 'ZREM', permitsKey, 'ZADD', permitsKey, 'SET', valueKey},
      valueKey, permitsKey, keep, KEYS[(p - 1) * 5 + 1]))
    cfg[p] = {rate, interval, keep, valueKey, permitsKey}
  end)
  if not ok then
    -- Redis 6.2 passes the error table on; Redis 7 and Valkey its text.
    local msg = type(e) == 'table' and e.err or tostring(e)
    local code, rest = string.match(msg, '(RL%u+) (.*)$')
    if code then
      msg = code .. ' ' .. p .. ' ' .. rest
    end
    error({err = msg})
  end
end
local out = {}
for p = 1, k do
  local rate, interval, keep, valueKey, permitsKey = unpack(cfg[p])
  local value = settle(valueKey, permitsKey, now, interval, rate)
  out[p] = giveBack(valueKey, permitsKey, now, interval, rate, value, tonumber(ARGV[3 + p]),
    ARGV[2], tonumber(ARGV[3]), '')
  refresh(valueKey, permitsKey, keep, KEYS[(p - 1) * 5 + 1])
end
return out
