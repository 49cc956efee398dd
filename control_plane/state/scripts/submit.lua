-- submit: store a request envelope and queue it, unless the tenant's queue is full.
-- After it returns "accepted" the request is durable in Redis: in its hash, in the queued ZSET
-- (score = global arrival seq, so order survives a leader change) and announced on `arrivals`
-- with its seq and envelope (re-queues announce the id alone).
-- Idempotent: a retried call for an id that already exists changes nothing.
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  arrival counter         arb:{c}:seq
-- KEYS[3]  queued ZSET             arb:{c}:queued
-- KEYS[4]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[5]  arrivals stream         arb:{c}:arrivals
-- ARGV[1]  request id
-- ARGV[2]  tenant
-- ARGV[3]  gateway id (its grants stream receives the grant)
-- ARGV[4]  envelope JSON
-- ARGV[5]  queue cap: reject when the tenant already has this many queued
-- ARGV[6]  now (epoch seconds)
-- ARGV[7]  arrivals stream approximate MAXLEN
-- Returns  {outcome, seq, depth}: outcome "accepted" | "rejected" | "duplicate";
--          seq = the request's arrival seq (0 when rejected); depth = tenant's queued count.

local depth = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
local existing = redis.call('HGET', KEYS[1], 'seq')
if existing then
  return {'duplicate', tonumber(existing), depth}
end
if depth >= tonumber(ARGV[5]) then
  return {'rejected', 0, depth}
end
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'envelope', ARGV[4], 'status', 'queued',
  'tenant', ARGV[2], 'gateway', ARGV[3], 'seq', seq, 'attempts', 1, 'submitted_at', ARGV[6])
redis.call('ZADD', KEYS[3], seq, ARGV[1])
depth = redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
-- the envelope rides along so the scheduler needs no second round trip to read it
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'id', ARGV[1], 'seq', seq,
  'envelope', ARGV[4])
return {'accepted', seq, depth}
