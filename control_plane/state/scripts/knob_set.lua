-- knob_set: store one knob value (or several at once), bump the knobs version and announce
-- each change. The announcements are published from inside the script, so a subscriber never
-- sees a version whose value is not stored yet.
--
-- KEYS[1]  knobs hash              arb:{c}:knobs          (name -> JSON value)
-- KEYS[2]  knobs version counter   arb:{c}:knobs:version
-- KEYS[3]  optional: a ticket key the caller set to "1" with a short expiry just before this
--          call (`state/tickets.py`); the call does anything only while it is "1", so a call
--          that runs late, after its caller gave up on an answer (a stall), changes nothing —
--          the expiry is Redis's own clock, and no time is read here. The call then stores its
--          result in it ("ran:<result>", kept 60 s), so a caller whose reply was lost can
--          still learn what it did
-- ARGV[1]  knob name
-- ARGV[2]  value as JSON
-- ARGV[3]  pub/sub channel         arb:{c}:chan:knobs     (a channel, not a key)
-- ARGV[4]  optional: the stored JSON the caller read ("" for none): compare-and-set, so two
--          read-modify-writes of one knob (two weight changes at once) cannot lose either
-- ARGV[5..] optional: more knobs changed in the same step, three arguments each (name, value
--          as JSON, the stored JSON the caller read); with them ARGV[4] is required, and no
--          knob may be named twice (an error reply otherwise, nothing changed). Every read
--          must still match or nothing changes (a `fairness` change and the policy params it
--          carries land together or not at all)
-- Returns  the last new knobs version, -1 (nothing changed) when a read no longer matches, or
--          -2 when the ticket has expired; publishes {"name", "value", "version"} on ARGV[3]
--          for each knob, in argument order.

local function spent(result)
  if KEYS[3] ~= nil then
    redis.call('SET', KEYS[3], 'ran:' .. result, 'PX', 60000)
  end
  return result
end

-- a malformed call changes nothing: Redis does not undo the writes of a script that fails
-- part-way, so every check comes before the first write
if #ARGV > 4 and (#ARGV - 4) % 3 ~= 0 then
  return redis.error_reply('knob_set: more knobs come as name, value, expected text')
end
if KEYS[3] ~= nil and redis.call('GET', KEYS[3]) ~= '1' then
  return -2
end
local changes = {{ARGV[1], ARGV[2], ARGV[4]}}
local named = {[ARGV[1]] = true}
for i = 5, #ARGV, 3 do
  if named[ARGV[i]] then
    return redis.error_reply('knob_set: knob ' .. ARGV[i] .. ' named twice')
  end
  named[ARGV[i]] = true
  changes[#changes + 1] = {ARGV[i], ARGV[i + 1], ARGV[i + 2]}
end
for _, change in ipairs(changes) do
  if change[3] ~= nil and (redis.call('HGET', KEYS[1], change[1]) or '') ~= change[3] then
    return spent(-1)
  end
end
local version
for _, change in ipairs(changes) do
  redis.call('HSET', KEYS[1], change[1], change[2])
  version = redis.call('INCR', KEYS[2])
  redis.call('PUBLISH', ARGV[3], '{"name":' .. cjson.encode(change[1]) .. ',"value":' ..
    change[2] .. ',"version":' .. version .. '}')
end
return spent(version)
