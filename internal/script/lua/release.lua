-- release. ARGV: permits (> 0), now (ms, or '' for the server's clock),
-- the releasing Client's own-record mark and its 1-based offset ('' and 0:
-- every record), a record to leave alone ('' for none: the Client's live
-- lease). Gives the permits back (giveback.lua, giveBack) and returns the
-- permits given back.
local now = clock(ARGV[2])
local rate, interval, keep, valueKey, permitsKey = limiter()
allow(refreshing({'ZREVRANGEBYSCORE', permitsKey, 'ZSCORE', permitsKey, 'ZREM', permitsKey, 'ZADD', permitsKey,
  'SET', valueKey}, valueKey, permitsKey, keep))
local value = settle(valueKey, permitsKey, now, interval, rate)
local given = giveBack(valueKey, permitsKey, now, interval, rate, value, tonumber(ARGV[1]),
  ARGV[3], tonumber(ARGV[4]), ARGV[5])
refresh(valueKey, permitsKey, keep)
return given
