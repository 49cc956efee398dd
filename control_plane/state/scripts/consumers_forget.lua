-- consumers_forget: delete a group's consumers that hold nothing and have been idle a while.
-- Each process reads under a name of its own (host, pid, a term's id), so every restart left
-- one more consumer in the group for good. Deleting one that holds no pending entry loses
-- nothing (a consumer that reads again is created again by its read), and this script reads
-- the pending count and deletes in one step: no entry can be delivered to it in between.
--
-- KEYS[1]  the stream                  arb:{c}:events
-- ARGV[1]  the group
-- ARGV[2]  idle milliseconds from which a consumer holding nothing goes
-- ARGV[3]  a consumer never deleted (the caller)
-- Returns  the names deleted.

local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then
  return {}  -- no stream or no group yet: nothing to forget
end
local min_idle = tonumber(ARGV[2])
local gone = {}
for _, consumer in ipairs(consumers) do
  local info = {}
  for i = 1, #consumer, 2 do
    info[consumer[i]] = consumer[i + 1]
  end
  if info['name'] ~= ARGV[3] and tonumber(info['pending']) == 0
      and tonumber(info['idle']) >= min_idle then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    gone[#gone + 1] = info['name']
  end
end
return gone
