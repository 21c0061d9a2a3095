-- Decides several calls of one script (acquire.lua, or its copy for an
-- evicting server), each on its own limiter, in one script call
-- (docs/combining.md, "Many limiters"). many.go puts that script before
-- this text as the function decide(KEYS, ARGV, KB, AB, NK, NA), so each
-- call runs the same code as alone, on its own keys and arguments (the
-- NK keys after KEYS[KB], the NA arguments after ARGV[AB]), except that
-- it reads the server's clock through serverNow (many_clock.lua).
--
-- KEYS: every call's keys, one call after another. ARGV: the number of
-- calls; then for each call the number of its keys, the number of its
-- arguments, and its arguments.
--
-- Reply: one entry per call, in order: what the call would have replied
-- alone (an integer, a table, or an error). A command error raised in a
-- call (not returned) ends that call alone, as its error: the calls
-- before it have written and keep their replies, the calls after it run.
--
-- Each call reads its keys and arguments where they lie: a table made
-- per call cost Redis more than the script call this saves, and tables
-- refilled per call a twentieth of a decision.
local out = {}
local k, a, nk, na, sk, sa = 0, 2, 0, 0, nil, nil
for i = 1, ARGV[1] + 0 do
  -- A call's counts are most often the last call's: Lua strings are
  -- interned, so comparing them costs less than converting them.
  if ARGV[a] ~= sk then
    sk = ARGV[a]
    nk = sk + 0
  end
  if ARGV[a + 1] ~= sa then
    sa = ARGV[a + 1]
    na = sa + 0
  end
  local ok, r = pcall(decide, KEYS, ARGV, k, a + 1, nk, na)
  if not ok and not (type(r) == 'table' and r.err) then
    r = redis.error_reply(tostring(r))
  end
  out[i] = r
  k, a = k + nk, a + 2 + na
end
return out
