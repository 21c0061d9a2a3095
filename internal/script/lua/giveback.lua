-- giveBack, for the release scripts (scripts.go).
-- Gives want permits back now, never past the rate, and takes as many out
-- of the window's records that the releasing Client may shrink (own),
-- oldest first (shrinking or removing them), so that they are not counted
-- again when those records expire: a release never raises the budget of a
-- later window. Its own records are those whose bytes at `at` are `mark`
-- (the Client's tag, wire.OwnMark); an empty mark (a format without a
-- tag) makes every record one it may shrink. `keep`, when not empty, is a
-- record left alone (the Client's live lease). Oldest first: a record no
-- newer than the releaser's unused grant gives its permits back now
-- instead of when it leaves the window, and every real-time window that
-- holds that record also holds the unused grant, so no window holds more
-- than the rate; a newer record (another caller's, granted after) would
-- let its permits be granted twice within an interval. value is the settled
-- value (settle). At most RELEASE_WALK of the window's oldest records are
-- looked at, so less than asked may come back; records that have left the
-- window hold nothing to give back (their permits came back when they
-- expired). Stores the value and returns the permits given back. The
-- single home of the rule: scripts.go prepends this file (after lib.lua)
-- to release.lua and release_all.lua.
local RELEASE_WALK = 256

-- Reports whether record m may be shrunk by the releaser: one of its own
-- (its mark at `at`), or one that no Go Client wrote (Redisson's, found by
-- the "GoRL" mark that every Go Bc0I and Lc0I record carries, wire.New),
-- but never another Go Client's, which may be its live lease, nor keep.
local function own(m, mark, at, keep)
  if m == keep then
    return false
  end
  if mark == '' or string.sub(m, at, at + #mark - 1) == mark then
    return true
  end
  local goBc0I = string.byte(m, 1) == 16 and #m == 21 and string.sub(m, 2, 5) == 'GoRL'
  return not goBc0I and string.sub(m, 9, 12) ~= 'GoRL'
end

local function giveBack(valueKey, permitsKey, now, interval, rate, value, want, mark, at, keep)
  want = math.min(want, rate - value)
  local given = 0
  if want > 0 then
    local recs = read('ZRANGEBYSCORE', permitsKey, string.format('(%d', now - interval), '+inf',
      'WITHSCORES', 'LIMIT', 0, RELEASE_WALK)
    for i = 1, #recs, 2 do
      local m, score = recs[i], recs[i + 1]
      local held = 0
      if own(m, mark, at, keep) then
        held = sum({m}) -- a record shorter than 4 bytes holds none
      end
      local take = math.min(held, want - given)
      local rest = string.sub(m, 1, -5) .. struct.pack('<I', held - take)
      if take > 0 and take < held and redis.call('ZSCORE', permitsKey, rest) then
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
