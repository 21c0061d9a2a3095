-- giveBack, for the release scripts (scripts.go).
-- Gives want permits back now, never past the rate, and takes as many out
-- of permit records in the window (shrinking or removing them), so that
-- they are not counted again when those records expire: a release never
-- raises the budget of a later window. It takes them first out of the
-- releasing Client's own records (those whose bytes at `at` are `mark`,
-- the Client's tag: wire.OwnMark), oldest first, then out of records no
-- Go Client wrote (Redisson's), oldest first, and only when those hold
-- too few, out of other Go Clients' records, oldest first (an operator's
-- release from the CLI, a release in another process than the grant),
-- which may shrink another Client's live lease; never out of `keep` (this
-- Client's live lease). An empty mark (a format without a tag) makes
-- every record the Client's own. Oldest first, because a record stamped
-- no later than the released grant gives its permits back early without
-- letting any real-time interval hold more than the rate: every interval
-- that holds that record's grant and a grant made after the release also
-- holds the released grant, whose permits went unused. A newer record
-- (another caller's, of this Client or another, granted after the
-- releaser) would give back permits that its caller used, and an
-- interval would then hold them twice. While the released grant's record
-- is in the window and holds the permits released, the oldest of the
-- releaser's own records are stamped no later than it; a release of
-- permits whose interval already ended (they came back when their record
-- expired) takes from records granted after, which it should not have
-- asked. value is the settled value (settle). At most RELEASE_WALK of the
-- window's newest records are looked at, oldest of them first, so less
-- than asked may come back; records that have left the window hold
-- nothing to give back (their permits came back when they expired). Stores
-- the value and returns the permits given back. The single home of the
-- rule: scripts.go prepends this file (after lib.lua) to release.lua and
-- release_all.lua.
local RELEASE_WALK = 256

-- Reports which pass may shrink record m: 1 for the releasing Client's
-- own, 2 for one no Go Client wrote, 3 for another Go Client's (found by
-- the "GoRL" mark of Go's Bc0I and Lc0I records, wire.New), false for
-- keep.
local function owner(m, mark, at, keep)
  if m == keep then
    return false
  end
  if mark == '' or string.sub(m, at, at + #mark - 1) == mark then
    return 1
  end
  local goBc0I = string.byte(m, 1) == 16 and #m == 21 and string.sub(m, 2, 5) == 'GoRL'
  if goBc0I or string.sub(m, 9, 12) == 'GoRL' then
    return 3
  end
  return 2
end

local function giveBack(valueKey, permitsKey, now, interval, rate, value, want, mark, at, keep)
  want = math.min(want, rate - value)
  local given = 0
  if want > 0 then
    local recs = read('ZREVRANGEBYSCORE', permitsKey, '+inf', string.format('(%d', now - interval),
      'WITHSCORES', 'LIMIT', 0, RELEASE_WALK)
    for pass = 1, 3 do
      for i = #recs - 1, 1, -2 do -- oldest first
        local m, score = recs[i], recs[i + 1]
        local held = 0
        if m and owner(m, mark, at, keep) == pass then
          held = sum({m}) -- a record shorter than 4 bytes holds none
        end
        local take = math.min(held, want - given)
        local rest = take > 0 and string.sub(m, 1, -5) .. struct.pack('<I', held - take)
        if take > 0 and take < held and redis.call('ZSCORE', permitsKey, rest) then
          -- The shrunk record would collide with another: leave this one.
          take = 0
        end
        if take > 0 then
          redis.call('ZREM', permitsKey, m)
          if take < held then
            redis.call('ZADD', permitsKey, score, rest)
          end
          recs[i] = false -- changed: not looked at again
          given = given + take
        end
        if given == want then
          break
        end
      end
      if given == want then
        break
      end
    end
  end
  redis.call('SET', valueKey, value + given)
  return given
end
