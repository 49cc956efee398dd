-- grant_many: grant a batch of queued requests (one scheduler cycle) in one round trip.
-- Each item follows exactly the rule of grant.lua: only a request still "queued" is granted (so
-- a grant racing a withdrawal has one winner), a retried item already granted to the same
-- worker counts as granted, and the grant entry goes to `KEYS[4] .. <the request's gateway>`
-- (same {cluster} hash tag, so the same slot). The fencing token is checked once, before any
-- item: a deposed leader changes nothing.
--
-- KEYS[1]  queued ZSET             arb:{c}:queued
-- KEYS[2]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[3]  in-flight hash          arb:{c}:inflight
-- KEYS[4]  grants stream prefix    arb:{c}:grants:
-- KEYS[5]  leader epoch            arb:{c}:leader:epoch
-- KEYS[6]  per-model queued hash   arb:{c}:model_queued
-- KEYS[7…] one request hash per item, in item order (arb:{c}:req:<id>)
-- ARGV[1]  now (epoch seconds)
-- ARGV[2]  grants stream approximate MAXLEN
-- ARGV[3]  fencing token of the granting leader ('' = unfenced, for tools and tests)
-- ARGV[4]  the ordering policy that decided the batch ('' = unnamed), written on each grant
--          entry as `policy` (the recorder labels the request's row with it)
-- ARGV[5…] per item, three values: request id, worker id, worker base URL
-- Returns  -1 when ARGV[3] is not the latest fencing token (nothing changes); otherwise a
--          list with, per item, 1 (granted to this worker) or 0 (not queued: withdrawn,
--          finished, granted elsewhere or unknown; the scheduler drops it).

if ARGV[3] ~= '' and redis.call('GET', KEYS[5]) ~= ARGV[3] then
  return -1
end

local out = {}
for i = 1, #KEYS - 6 do
  local key = KEYS[6 + i]
  local base = 4 + (i - 1) * 3
  local id, worker, url = ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
  local st = redis.call('HMGET', key, 'status', 'tenant', 'gateway', 'worker', 'attempts',
    'model')
  if st[1] == 'granted' and st[4] == worker then
    out[i] = 1
  elseif st[1] ~= 'queued' then
    out[i] = 0
  else
    redis.call('HSET', key, 'status', 'granted', 'worker', worker, 'worker_url', url,
      'granted_at', ARGV[1])
    redis.call('ZREM', KEYS[1], id)
    if redis.call('HINCRBY', KEYS[2], st[2], -1) <= 0 then
      redis.call('HDEL', KEYS[2], st[2])
    end
    if st[6] and redis.call('HINCRBY', KEYS[6], st[6], -1) <= 0 then
      redis.call('HDEL', KEYS[6], st[6])
    end
    redis.call('HSET', KEYS[3], id, worker)
    local entry = {'id', id, 'worker_id', worker, 'worker_url', url, 'granted_at', ARGV[1],
      'attempt', st[5]}
    if ARGV[4] ~= '' then
      entry[#entry + 1] = 'policy'
      entry[#entry + 1] = ARGV[4]
    end
    redis.call('XADD', KEYS[4] .. st[3], 'MAXLEN', '~', ARGV[2], '*', unpack(entry))
    out[i] = 1
  end
end
return out
