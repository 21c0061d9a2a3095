-- trySetRate. KEYS: the config hash only. ARGV: rate, interval, type,
-- keepAlive. Returns 1 when the type field was newly set.
read('HSETNX', KEYS[1], 'rate', ARGV[1])
redis.call('HSETNX', KEYS[1], 'interval', ARGV[2])
redis.call('HSETNX', KEYS[1], 'keepAliveTime', ARGV[4])
local set = redis.call('HSETNX', KEYS[1], 'type', ARGV[3])
if set == 1 and tonumber(ARGV[4]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return set
