-- lease_renew: extend the leader lease only if `holder` still has it (compare and expire).
-- With a token, only the tenure with that token is extended (a renewal delayed by a Redis
-- stall cannot stretch a later tenure of the same holder).
--
-- KEYS[1]  lease                   arb:{c}:leader
-- KEYS[2]  epoch counter           arb:{c}:leader:epoch
-- ARGV[1]  holder id
-- ARGV[2]  time to live in milliseconds
-- ARGV[3]  the tenure's fencing token (optional; "" = any tenure of `holder`)
-- Returns  1 when renewed, 0 when the lease expired or belongs to someone else (or another
--          tenure).

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[3] and ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
