-- reclaim: the scheduler leader takes back the lent slots no gateway has taken yet, for the
-- given models or (none given: a new leader's takeover) for every model. A slot is either
-- taken (submit.lua: its arrival will tell the leader) or reclaimed here, never both: both
-- scripts are atomic. Refused for a token that is not the latest (a deposed leader must not
-- take back what its successor lent).
-- Exactly once: like lend.lua, a call whose sequence number was already applied under the
-- same token changes nothing and returns what its first try took back (kept in KEYS[4]).
--
-- KEYS[1]  leader epoch            arb:{c}:leader:epoch
-- KEYS[2]  models with lent slots  arb:{c}:lent_models
-- KEYS[3]  lent slots prefix       arb:{c}:lent:   (the model is appended; same hash tag)
-- KEYS[4]  lending state           arb:{c}:lent_state  (token, seq of the last call, last)
-- ARGV[1]  fencing token of the reclaiming leader
-- ARGV[2]  this call's sequence number (> the last one of this token)
-- ARGV[3…] models (none: every model in KEYS[2])
-- Returns  -1 for a stale token; otherwise a flat list model, worker, unused slots, … of
--          every slot taken back.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local st = redis.call('HMGET', KEYS[4], 'token', 'seq', 'last')
if st[1] == ARGV[1] and tonumber(st[2] or '0') >= tonumber(ARGV[2]) then
  return cjson.decode(st[3] or '[]')
end
local models = {}
if #ARGV > 2 then
  for i = 3, #ARGV do
    models[#models + 1] = ARGV[i]
  end
else
  models = redis.call('SMEMBERS', KEYS[2])
end
local out = {}
for _, model in ipairs(models) do
  local key = KEYS[3] .. model
  local lent = redis.call('HGETALL', key)
  for i = 1, #lent, 2 do
    out[#out + 1] = model
    out[#out + 1] = lent[i]
    out[#out + 1] = lent[i + 1]
  end
  redis.call('DEL', key)
  redis.call('SREM', KEYS[2], model)
end
local kept = '[]'
if #out > 0 then
  kept = cjson.encode(out)
end
redis.call('HSET', KEYS[4], 'token', ARGV[1], 'seq', ARGV[2], 'last', kept)
return out
