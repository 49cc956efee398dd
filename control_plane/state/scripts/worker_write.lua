-- worker_write: one change of the worker registry — register/update, set the status, or
-- forget a worker — optionally bounded in time by a ticket.
-- An admin change is recorded in SQL and goes live here while that transaction is open; a
-- call that timed out at the admin (a stall) still runs when Redis answers again, after the
-- transaction was rolled back. With a ticket, such a late call changes nothing.
--
-- KEYS[1]  worker ids set          arb:{c}:workers
-- KEYS[2]  worker hash             arb:{c}:worker:<id>    (field -> JSON value)
-- KEYS[3]  worker metrics hash     arb:{c}:worker_metrics (id -> JSON sample)
-- KEYS[4]  optional: a ticket key the caller set to "1" with a short expiry just before this
--          call (`state/tickets.py`); the change applies only while it is "1" — the expiry is
--          Redis's own clock, and no time is read here — and then stores its result in it
--          ("ran:<result>", kept 60 s), so a caller whose reply was lost can still learn it
-- ARGV[1]  "upsert", "create", "update", "status" or "remove"
-- ARGV[2]  worker id
-- ARGV[3]  status: the status as JSON, e.g. "\"draining\""; upsert: the first field name,
--          ARGV[3…] being field / JSON value pairs (a new worker also gets status "active");
--          create: as upsert, only when no entry exists;
--          update: the `origin` the entry must still have (JSON, "" for none), ARGV[4…] the
--          field / JSON value pairs — a compare-and-set, so a change decided on a read never
--          re-creates a worker removed meanwhile nor takes over one registered anew
-- Returns  1 when changed; 0 when the worker is not registered (update, status, remove), is
--          (create) or its origin is another (update); -2 when the ticket has expired (nothing
--          changed).

if KEYS[4] ~= nil and redis.call('GET', KEYS[4]) ~= '1' then
  return -2
end

local function spent(result)
  if KEYS[4] ~= nil then
    redis.call('SET', KEYS[4], 'ran:' .. result, 'PX', 60000)
  end
  return result
end

local op = ARGV[1]
if op == 'create' then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    return spent(0)
  end
  op = 'upsert'
end
if op == 'upsert' then
  local fields = {}
  for i = 3, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  redis.call('SADD', KEYS[1], ARGV[2])
  if #fields > 0 then
    redis.call('HSET', KEYS[2], unpack(fields))
  end
  redis.call('HSETNX', KEYS[2], 'status', '"active"')
  return spent(1)
end
if op == 'update' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return spent(0)
  end
  if (redis.call('HGET', KEYS[2], 'origin') or '') ~= ARGV[3] then
    return spent(0)
  end
  local fields = {}
  for i = 4, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  if #fields > 0 then
    redis.call('HSET', KEYS[2], unpack(fields))
  end
  return spent(1)
end
if op == 'status' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return spent(0)
  end
  redis.call('HSET', KEYS[2], 'status', ARGV[3])
  return spent(1)
end
if op == 'remove' then
  local removed = redis.call('SREM', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
  return spent(removed)
end
return redis.error_reply('worker_write: unknown operation ' .. tostring(op))
