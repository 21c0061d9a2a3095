-- returnRecord, for the lease scripts: redis_scripts.go prepends this file,
-- after lib.lua, to lease.lua and lease_end.lua.
--
-- Gives back `unused` permits of one named record: `member` is the exact
-- member a lease wrote (its random part and its count). The record is
-- rewritten with the same random part and score and a count `unused`
-- smaller, or removed when nothing is left, and the permits are added to
-- value. Unlike giveBack (giveback.lua), which takes from the newest
-- records whoever wrote them, it touches only the lease's own record: the
-- permits the lease handed out stay counted from the lease's stamp, and
-- records stamped after it keep theirs (giveBack would shrink a later
-- record, whose permits really granted at its stamp would then come back
-- an interval after the lease's stamp: too soon).
--
-- Idempotent: the member carries the count, so a return that was applied
-- finds no such member when it is sent again and gives nothing back; Go
-- sends a return whose outcome it does not know again.
--
-- Gives back nothing, and writes nothing, when the record is gone (a
-- SetRate or Delete dropped it, a Release shrank it, it expired), when it
-- has left the window (its permits came back when it expired), or when its
-- shrunk form would collide with another record. Never lifts value above
-- rate (as giveBack). value is the settled value (lib.lua, settle).
-- Returns the permits given back and the new value; the caller stores the
-- value.
local function returnRecord(permitsKey, now, interval, rate, value, member, unused)
  if not unused or unused <= 0 or #member < 4 then
    return 0, value
  end
  local score = read('ZSCORE', permitsKey, member)
  if not score or tonumber(score) <= now - interval then
    return 0, value
  end
  local held = sum({member})
  local give = math.min(unused, held, rate - value)
  if give <= 0 then
    return 0, value
  end
  local rest = string.sub(member, 1, -5) .. struct.pack('<I', held - give)
  if give < held and redis.call('ZSCORE', permitsKey, rest) then
    return 0, value -- the shrunk record would collide: leave it whole
  end
  redis.call('ZREM', permitsKey, member)
  if give < held then
    redis.call('ZADD', permitsKey, score, rest)
  end
  return give, value + give
end
