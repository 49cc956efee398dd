-- lease_renew: extend the leader lease only if `holder` still has it (compare and expire).
--
-- KEYS[1]  lease                   arb:{c}:leader
-- ARGV[1]  holder id
-- ARGV[2]  time to live in milliseconds
-- Returns  1 when renewed, 0 when the lease expired or belongs to someone else.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
