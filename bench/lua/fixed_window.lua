-- Fixed window: one counter per window of the clock (INCR + PEXPIRE).
-- KEYS[1]  the counter of the window that holds now (the caller names it
--          after floor(now / interval))
-- ARGV[1]  limit: grants per window
-- ARGV[2]  interval in milliseconds
-- Returns 1 (granted) or 0 (refused). Refused calls are counted too, as in
-- the textbook pattern; that only ever raises the count above the limit.
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  return 0
end
return 1
