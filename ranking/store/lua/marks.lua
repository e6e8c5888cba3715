-- marks.lua: raise the latest stream time mark of partitions.
-- KEYS[1]  <prefix>:wm:last, a hash: "<topic>|<partition>" -> "<offset>:<stream ms>:<written ms>"
-- ARGV     field, offset, value, ... (triples)
-- A field is set only when its offset is beyond the stored one, so a
-- replay that writes the marks of old offsets never moves a partition's
-- latest mark back (nor refreshes its write time, which tells an idle
-- partition).
local key = KEYS[1]
for i = 1, #ARGV, 3 do
  local f, off, v = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local cur = redis.call('HGET', key, f)
  local old = -1
  if cur then old = tonumber(string.match(cur, '^(-?%d+)')) or -1 end
  if off > old then redis.call('HSET', key, f, v) end
end
return 0
