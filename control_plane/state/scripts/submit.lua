-- submit: store a request envelope and queue it, unless the tenant's queue is full — or, on
-- the fast lane, grant it at once on a slot the scheduler leader lent (architecture.md §2).
-- After it returns "accepted" the request is durable in Redis: in its hash, in the queued ZSET
-- (score = global arrival seq, so order survives a leader change) and announced on `arrivals`
-- with its seq and envelope (re-queues announce the id alone).
-- Fast lane (ARGV[9] = '1'): when nothing of the request's model is queued (KEYS[6]) and some
-- worker of that model has a lent slot left (KEYS[8]), one slot is taken: the hash is written
-- as `granted` with the same fields a grant writes, the request enters `inflight`, and the
-- arrival carries `worker` and `lent_by` (the lending leader's token, from KEYS[10]) so the
-- leader converts the slot into this request. The worker with the most unused lent slots is
-- taken (ties: the smallest id). Otherwise the request is queued as above.
-- Idempotent: a retried call for an id that already exists changes nothing; it answers
-- "duplicate", except for a request this gateway took from the lane and still holds in its first
-- attempt: that retry (its first reply lost) is answered "granted" again, with the same worker,
-- for no grant message will ever tell the gateway of a take. A tombstone (abandon.lua) has a
-- seq of 0, so a submit that runs after it is a duplicate.
-- A gateway replica without its liveness key (considered lost, or already forgotten by the
-- sweep) that stores a request is registered again, with a score above the one the sweep read
-- (gateway_forget.lua refuses then): a request always has a registered owner, so it is released
-- if that replica never beats again (architecture.md, "A gateway cut off from Redis").
--
-- KEYS[1]  request hash            arb:{c}:req:<id>
-- KEYS[2]  arrival counter         arb:{c}:seq
-- KEYS[3]  queued ZSET             arb:{c}:queued
-- KEYS[4]  per-tenant queued hash  arb:{c}:tenant_queued
-- KEYS[5]  arrivals stream         arb:{c}:arrivals
-- KEYS[6]  per-model queued hash   arb:{c}:model_queued
-- KEYS[7]  in-flight hash          arb:{c}:inflight
-- KEYS[8]  the model's lent slots  arb:{c}:lent:<model>  (worker id → unused lent slots)
-- KEYS[9]  lent workers' URLs      arb:{c}:lent_urls     (worker id → base URL)
-- KEYS[10] lending state           arb:{c}:lent_state  (field `token`: the lender's)
-- KEYS[11] the gateway's liveness  arb:{c}:gateway:<id>:alive
-- KEYS[12] gateway registry ZSET   arb:{c}:gateways
-- ARGV[1]  request id
-- ARGV[2]  tenant
-- ARGV[3]  gateway id (its grants stream receives the grant)
-- ARGV[4]  envelope JSON
-- ARGV[5]  queue cap: reject when the tenant already has this many queued
-- ARGV[6]  now (epoch seconds)
-- ARGV[7]  arrivals stream approximate MAXLEN
-- ARGV[8]  model
-- ARGV[9]  '1' to try the fast lane first, '0' to queue
-- Returns  {outcome, seq, depth, worker, worker_url}: outcome "accepted" | "rejected" |
--          "duplicate" | "granted" (fast lane; worker and worker_url set, else '');
--          seq = the request's arrival seq (0 when rejected); depth = tenant's queued count.

local depth = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
local existing = redis.call('HGET', KEYS[1], 'seq')
if existing then
  local st = redis.call('HMGET', KEYS[1], 'status', 'gateway', 'lent_by', 'attempts', 'worker',
    'worker_url')
  if st[1] == 'granted' and st[2] == ARGV[3] and st[3] and st[4] == '1' then
    return {'granted', tonumber(existing), depth, st[5], st[6] or ''}
  end
  return {'duplicate', tonumber(existing), depth, '', ''}
end

-- registers the submitting replica again when it has no liveness key (see above)
local function own()
  if redis.call('EXISTS', KEYS[11]) == 1 then
    return
  end
  local score = tonumber(ARGV[6])
  local last = redis.call('ZSCORE', KEYS[12], ARGV[3])
  if last and tonumber(last) >= score then
    score = tonumber(last) + 0.001
  end
  redis.call('ZADD', KEYS[12], score, ARGV[3])
end

if ARGV[9] == '1' and tonumber(redis.call('HGET', KEYS[6], ARGV[8]) or '0') <= 0 then
  local lent = redis.call('HGETALL', KEYS[8])
  local worker, most = nil, 0
  for i = 1, #lent, 2 do
    local n = tonumber(lent[i + 1])
    if n > most or (n == most and n > 0 and lent[i] < worker) then
      worker, most = lent[i], n
    end
  end
  if worker then
    if redis.call('HINCRBY', KEYS[8], worker, -1) <= 0 then
      redis.call('HDEL', KEYS[8], worker)
    end
    local url = redis.call('HGET', KEYS[9], worker) or ''
    local lender = redis.call('HGET', KEYS[10], 'token') or '0'
    own()
    local seq = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], 'id', ARGV[1], 'envelope', ARGV[4], 'status', 'granted',
      'tenant', ARGV[2], 'gateway', ARGV[3], 'seq', seq, 'attempts', 1,
      'submitted_at', ARGV[6], 'model', ARGV[8], 'worker', worker, 'worker_url', url,
      'granted_at', ARGV[6], 'lent_by', lender)
    redis.call('HSET', KEYS[7], ARGV[1], worker)
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'id', ARGV[1], 'seq', seq,
      'envelope', ARGV[4], 'worker', worker, 'lent_by', lender)
    return {'granted', seq, depth, worker, url}
  end
end

if depth >= tonumber(ARGV[5]) then
  return {'rejected', 0, depth, '', ''}
end
own()
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'envelope', ARGV[4], 'status', 'queued',
  'tenant', ARGV[2], 'gateway', ARGV[3], 'seq', seq, 'attempts', 1, 'submitted_at', ARGV[6],
  'model', ARGV[8])
redis.call('ZADD', KEYS[3], seq, ARGV[1])
depth = redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
redis.call('HINCRBY', KEYS[6], ARGV[8], 1)
-- the envelope rides along so the scheduler needs no second round trip to read it
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'id', ARGV[1], 'seq', seq,
  'envelope', ARGV[4])
return {'accepted', seq, depth, '', ''}
