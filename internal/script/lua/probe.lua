-- Permission probe (redis_permissions.go). KEYS: a limiter's five keys. Runs
-- each command that the scripts may call after their first write, on the
-- limiter's keys, in a form that Redis refuses after its ACL check and
-- before it changes anything (a bad number, a syntax error, an odd
-- argument count, a member that no permit record is), or that only reads.
-- Returns the lower-case names of the commands the user may not run.
-- Redis 6.2 and 7.0 say "can't run this command", Valkey "no permissions
-- to run"; any other error (WRONGTYPE on corrupt state, the parse errors
-- the probes provoke) means the command passed the ACL check.
local probes = {
  {'HMGET', KEYS[1], 'rate'},
  {'HGET', KEYS[1], 'type'},
  {'HSET', KEYS[1], 'f', 'v', 'odd'},
  {'GET', KEYS[2]},
  {'SET', KEYS[2], 'v', 'BADOPTION'},
  {'DECRBY', KEYS[2], 'NaN'},
  {'EXISTS', KEYS[4]},
  {'PTTL', KEYS[1]},
  {'PEXPIRE', KEYS[1], 'NaN'},
  {'ZADD', KEYS[4], 'NaN', 'm'},
  {'ZRANGE', KEYS[4], '1', '0'},
  {'ZRANGEBYSCORE', KEYS[4], '1', '0'},
  {'ZREVRANGEBYSCORE', KEYS[4], '0', '1'},
  {'ZSCORE', KEYS[4], '\0ratelimiter permission probe\0'},
  {'ZREM', KEYS[4], '\0ratelimiter permission probe\0'},
  {'ZREMRANGEBYRANK', KEYS[4], 'NaN', '0'},
  {'ZREMRANGEBYSCORE', KEYS[4], 'NaN', '0'},
}
-- DEL has no form that fails after the ACL check: Redis 7 and Valkey
-- check it with acl_check_cmd; Redis 6.2 deletes a key next to the value
-- key that nothing uses (a key pattern that leaves it out makes Redis
-- refuse the key, not the command, which reads as allowed).
local denied = {}
if redis.acl_check_cmd then
  if not redis.acl_check_cmd('DEL', KEYS[2]) then
    denied[#denied + 1] = 'del'
  end
else
  probes[#probes + 1] = {'DEL', KEYS[2] .. ':ratelimiter-acl-probe'}
end
for _, p in ipairs(probes) do
  local r = redis.pcall(unpack(p))
  if type(r) == 'table' and r.err then
    local e = string.lower(r.err)
    if string.find(e, "can't run this command", 1, true) or string.find(e, 'no permissions to run', 1, true) then
      denied[#denied + 1] = string.lower(p[1])
    end
  end
end
return denied
