-- giveBack, for the release scripts (redis_scripts.go).
-- Gives want permits back now, never past the rate, and takes as many out
-- of the newest permit records (shrinking or removing them), so that they
-- are not counted again when those records expire: a release never raises
-- the budget of a later window. value is the settled value (settle). At
-- most RELEASE_WALK records are changed, so less than asked may come back
-- when the newest records hold fewer permits; records that have left the
-- window hold nothing to give back (their permits came back when they
-- expired). Stores the value and returns the permits given back. The
-- single home of the rule: redis_scripts.go prepends this file (after lib.lua)
-- to release.lua and release_all.lua.
local RELEASE_WALK = 128
local function giveBack(valueKey, permitsKey, now, interval, rate, value, want)
  want = math.min(want, rate - value)
  local given = 0
  if want > 0 then
    local recs = read('ZREVRANGEBYSCORE', permitsKey, '+inf', string.format('(%d', now - interval),
      'WITHSCORES', 'LIMIT', 0, RELEASE_WALK)
    for i = 1, #recs, 2 do
      local m, score = recs[i], recs[i + 1]
      local held = sum({m}) -- a record shorter than 4 bytes holds none
      local take = math.min(held, want - given)
      local rest = string.sub(m, 1, -5) .. struct.pack('<I', held - take)
      if take < held and redis.call('ZSCORE', permitsKey, rest) then
        -- The shrunk record would collide with another: leave this one.
        take = 0
      end
      if take > 0 then
        redis.call('ZREM', permitsKey, m)
        if take < held then
          redis.call('ZADD', permitsKey, score, rest)
        end
        given = given + take
      end
      if given == want then
        break
      end
    end
  end
  redis.call('SET', valueKey, value + given)
  return given
end
