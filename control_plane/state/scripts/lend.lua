-- lend: the scheduler leader lends free slots of a model's workers to the gateways' fast lane
-- (see submit.lua). Refused for a token that is not the latest (a deposed leader lends
-- nothing). The leader counts every slot it lends as occupied until it has either read the
-- take's arrival (then the slot is that request's) or reclaimed it (reclaim.lua), so the
-- slots lent plus the requests granted never exceed what its admission allows.
-- Exactly once: each call of one leader carries the next number of its own sequence; a call
-- whose number was already applied under the same token (a retry after a lost reply) changes
-- nothing and returns 1, so the leader's count never drifts from Redis.
--
-- KEYS[1]  leader epoch            arb:{c}:leader:epoch
-- KEYS[2]  the model's lent slots  arb:{c}:lent:<model>
-- KEYS[3]  lent workers' URLs      arb:{c}:lent_urls
-- KEYS[4]  lending state           arb:{c}:lent_state  (token, seq of the last call, last)
-- KEYS[5]  models with lent slots  arb:{c}:lent_models
-- ARGV[1]  fencing token of the lending leader
-- ARGV[2]  this call's sequence number (> the last one of this token)
-- ARGV[3]  model
-- ARGV[4…] per worker, three values: worker id, base URL, slots to add (> 0)
-- Returns  1 when lent (now or by the first try of this call), -1 when ARGV[1] is not the
--          latest fencing token (nothing changes).

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local st = redis.call('HMGET', KEYS[4], 'token', 'seq')
if st[1] == ARGV[1] and tonumber(st[2] or '0') >= tonumber(ARGV[2]) then
  return 1
end
for i = 4, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], tonumber(ARGV[i + 2]))
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[4], 'token', ARGV[1], 'seq', ARGV[2], 'last', '[]')
redis.call('SADD', KEYS[5], ARGV[3])
return 1
