-- knob_set: store one knob value, bump the knobs version and announce the change.
-- The announcement is published from inside the script, so a subscriber never sees a version
-- whose value is not stored yet.
--
-- KEYS[1]  knobs hash              arb:{c}:knobs          (name -> JSON value)
-- KEYS[2]  knobs version counter   arb:{c}:knobs:version
-- ARGV[1]  knob name
-- ARGV[2]  value as JSON
-- ARGV[3]  pub/sub channel         arb:{c}:chan:knobs     (a channel, not a key)
-- Returns  the new knobs version; publishes {"name", "value", "version"} on ARGV[3].

redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local version = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], '{"name":' .. cjson.encode(ARGV[1]) .. ',"value":' .. ARGV[2] ..
  ',"version":' .. version .. '}')
return version
