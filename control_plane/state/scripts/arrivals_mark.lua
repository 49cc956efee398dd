-- arrivals_mark: move the scheduler group's last-delivered id of `arrivals` to the last entry
-- the leader has applied, fenced by its token. The leader reads `arrivals` by id (XREAD after
-- its own cursor, so a read whose reply was lost is simply read again); the group only records
-- how far the leading term got, which is where trimming stops and where the next term starts.
-- A deposed leader's late mark is refused, so it cannot move the mark past what its successor
-- has read (trimming would then drop entries the successor never saw).
--
-- KEYS[1]  arrivals stream          arb:{c}:arrivals
-- KEYS[2]  leader epoch counter     arb:{c}:leader:epoch
-- ARGV[1]  the consumer group       ("scheduler")
-- ARGV[2]  the last entry id applied
-- ARGV[3]  fencing token, or "" for an unfenced mark
-- Returns  1 when marked (the group is created at that id if it was missing), 0 when the token
--          is stale (nothing changed).

if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return 0
end
local moved = redis.pcall('XGROUP', 'SETID', KEYS[1], ARGV[1], ARGV[2])
if type(moved) == 'table' and moved.err then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'MKSTREAM')
end
return 1
