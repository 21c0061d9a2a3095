-- The floor: a script that runs one command, the least a Lua limiter can
-- cost Redis. It grants every call.
-- KEYS[1]  a counter
return redis.call('INCR', KEYS[1])
