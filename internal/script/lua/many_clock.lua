-- The server's clock for a many script (many.lua): acquire.lua's reading
-- (TIME, then the stamp in whole ms), taken anew for every NOWCALLS
-- calls. TIME and the stamp cost Redis about a tenth of a decision
-- (docs/combining.md, "Many limiters"); a call's stamp is then at most NOWCALLS - 1
-- calls' work older than the call, on top of the up to 1 ms that whole-ms
-- stamps already drop (docs/combining.md, "Many limiters").
local NOWCALLS = 8
-- acquire.lua's locals for Redis's command functions, made once for all the
-- calls (many.go takes acquire.lua's own line out).
local rcall, rpcall = redis.call, redis.pcall
local NOW, NOWN, NOWLEFT = '', 0, 0
-- Returns the stamp (a string) and the same as a number.
local function serverNow()
  if NOWLEFT == 0 then
    local t = rcall('TIME')
    NOW, NOWLEFT = t[1] .. string.sub('00000' .. t[2], -6, -4), NOWCALLS
    NOWN = NOW + 0
  end
  NOWLEFT = NOWLEFT - 1
  return NOW, NOWN
end
