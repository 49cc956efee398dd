-- dead_letter_add: keep one entry a consumer gave up on and count it; with a source stream
-- and group, acknowledge it there first and keep it only if this call's acknowledgement took
-- it out of the group's pending list. So a set-aside that timed out at its caller and was
-- repeated (the first call running late, when Redis answered again) keeps the entry once.
-- Without a group, KEYS[3] (optional) is a once-key: the entry is kept only if this call
-- creates it (it expires after a day), so a stream read again by id — `arrivals`, after a lost
-- reply or by the next leader — keeps a bad entry once.
--
-- KEYS[1]  dead-letter stream        arb:{c}:dead_letters
-- KEYS[2]  counts hash               arb:{c}:dead_letters:counts
-- KEYS[3]  source stream (optional, with ARGV[3]), or without ARGV[3] the once-key (optional)
--          arb:{c}:dead_letters:once:<source>:<entry id>
-- ARGV[1]  approximate MAXLEN of the dead-letter stream
-- ARGV[2]  counter field `consumer:kind`
-- ARGV[3]  group acknowledging the entry ("" = none)
-- ARGV[4]  the entry's id in the source stream
-- ARGV[5…] the dead letter's field / value pairs
-- Returns  the dead letter's id, or "" when the entry was no longer pending for the group
--          (or its once-key existed).

if ARGV[3] ~= '' and redis.call('XACK', KEYS[3], ARGV[3], ARGV[4]) == 0 then
  return ''
end
if ARGV[3] == '' and KEYS[3] and not redis.call('SET', KEYS[3], '1', 'NX', 'PX', 86400000) then
  return ''
end
local entry = {}
for i = 5, #ARGV do
  entry[#entry + 1] = ARGV[i]
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(entry))
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return id
