-- lease_release: give the leader lease up only if `holder` has it (compare and delete), so a
-- standby can take over at once instead of waiting for the expiry. With a token, only the
-- tenure with that token is given up: a release that timed out in a Redis stall and runs
-- after its holder took the lease anew leaves the new tenure alone.
--
-- KEYS[1]  lease                   arb:{c}:leader
-- KEYS[2]  epoch counter           arb:{c}:leader:epoch
-- ARGV[1]  holder id
-- ARGV[2]  the tenure's fencing token (optional; "" = any tenure of `holder`)
-- Returns  1 when released, 0 when `holder` (or that tenure) did not have it.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] and ARGV[2] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
