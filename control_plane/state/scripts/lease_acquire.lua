-- lease_acquire: take the leader lease if it is free, or extend it if `holder` has it
-- (with ARGV[4] = "1", a lease `holder` still has is re-taken as a new tenure: new token).
-- Each new acquisition increments the epoch; the epoch is the fencing token that lets anyone
-- detect writes from a deposed leader (its token is no longer the current epoch).
--
-- KEYS[1]  lease                   arb:{c}:leader       (string: holder id, PX expiry)
-- KEYS[2]  epoch counter           arb:{c}:leader:epoch
-- KEYS[3]  lease info hash         arb:{c}:leader:info  (holder, token, acquired_at)
-- ARGV[1]  holder id
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  now (epoch seconds, recorded as acquired_at)
-- ARGV[4]  "1" to start a new tenure even if `holder` has the lease (optional)
-- Returns  the holder's fencing token (> 0), or 0 when another holder has the lease.

local current = redis.call('GET', KEYS[1])
if current == ARGV[1] and ARGV[4] ~= '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]))
end
if current and current ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], 'holder', ARGV[1], 'token', token, 'acquired_at', ARGV[3])
return token
