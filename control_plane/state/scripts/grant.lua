-- grant: hand a queued request to a worker and tell the gateway that holds its client.
-- Only a request still "queued" is granted, so a grant racing a withdrawal has one winner.
-- Idempotent: a retried call for a request already granted to the same worker returns 1.
-- The grants stream is `KEYS[5] .. <gateway id stored in the request hash>`: the key is derived
-- from the request, but it carries the same {cluster} hash tag as KEYS[5], so it lives in the
-- same slot (Redis Cluster safe).
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  queued ZSET             arb:{c}:queued
-- KEYS[3]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[4]  in-flight hash          arb:{c}:inflight
-- KEYS[5]  grants stream prefix    arb:{c}:grants:
-- KEYS[6]  leader epoch            arb:{c}:leader:epoch
-- KEYS[7]  per-model queued hash   arb:{c}:model_queued
-- ARGV[1]  request id
-- ARGV[2]  worker id
-- ARGV[3]  worker base URL
-- ARGV[4]  now (epoch seconds)
-- ARGV[5]  grants stream approximate MAXLEN
-- ARGV[6]  fencing token of the granting leader ('' = unfenced, for tools and tests)
-- Returns  1 when the request is granted to this worker, 0 when it is not queued
--          (withdrawn, finished, granted elsewhere or unknown): the scheduler drops it;
--          -1 when ARGV[6] is not the latest fencing token (a deposed leader): nothing changes.

if ARGV[6] ~= nil and ARGV[6] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[6] then
  return -1
end

local st = redis.call('HMGET', KEYS[1], 'status', 'tenant', 'gateway', 'worker', 'attempts',
  'model')
if st[1] == 'granted' and st[4] == ARGV[2] then
  return 1
end
if st[1] ~= 'queued' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'granted', 'worker', ARGV[2], 'worker_url', ARGV[3],
  'granted_at', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('HINCRBY', KEYS[3], st[2], -1) <= 0 then
  redis.call('HDEL', KEYS[3], st[2])
end
if st[6] and redis.call('HINCRBY', KEYS[7], st[6], -1) <= 0 then
  redis.call('HDEL', KEYS[7], st[6])
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
redis.call('XADD', KEYS[5] .. st[3], 'MAXLEN', '~', ARGV[5], '*', 'id', ARGV[1],
  'worker_id', ARGV[2], 'worker_url', ARGV[3], 'granted_at', ARGV[4], 'attempt', st[5])
return 1
