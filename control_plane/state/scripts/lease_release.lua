-- lease_release: give the leader lease up only if `holder` has it (compare and delete), so a
-- standby can take over at once instead of waiting for the expiry.
--
-- KEYS[1]  lease                   arb:{c}:leader
-- ARGV[1]  holder id
-- Returns  1 when released, 0 when `holder` did not have it.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
