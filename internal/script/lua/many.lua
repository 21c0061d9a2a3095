-- Decides several calls of one script (acquire.lua, or its copy for an
-- evicting server), each on its own limiter, in one script call
-- (docs/combining.md, "Many limiters"). many.go puts that script before
-- this text as the function decide(KEYS, ARGV), so each call runs the
-- same code as alone, on its own keys and arguments, except that it
-- reads the server's clock through serverNow (below).
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
-- One pair of tables carries every call's keys and arguments, refilled
-- for each: a table made per call costs Redis more than the script call
-- this saves.
local keys, args, out = {}, {}, {}
local k, a, nk0, na0, sk, sa = 0, 2, 0, 0, nil, nil
for i = 1, ARGV[1] + 0 do
  -- A call's counts are most often the last call's: Lua strings are
  -- interned, so comparing them costs less than converting them.
  local nk, na = nk0, na0
  if ARGV[a] ~= sk then
    sk = ARGV[a]
    nk = sk + 0
  end
  if ARGV[a + 1] ~= sa then
    sa = ARGV[a + 1]
    na = sa + 0
  end
  for j = 1, nk do
    keys[j] = KEYS[k + j]
  end
  for j = nk + 1, nk0 do
    keys[j] = nil
  end
  for j = 1, na do
    args[j] = ARGV[a + 1 + j]
  end
  for j = na + 1, na0 do
    args[j] = nil
  end
  nk0, na0, k, a = nk, na, k + nk, a + 2 + na
  local ok, r = pcall(decide, keys, args)
  if not ok and not (type(r) == 'table' and r.err) then
    r = redis.error_reply(tostring(r))
  end
  out[i] = r
end
return out
