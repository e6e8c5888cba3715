-- positions.lua: raise partitions' position records (Store.RaisePositions).
-- KEYS[1]  <base>:pos, a hash: "<topic>|<partition>" -> record (position.go)
-- ARGV     gens counter, then field, offset, record, ... (triples)
-- The gens counter (the gens hash's "next" as the caller read it) becomes
-- the last one seen (POS_GENS; GENS_NONE removes it). A record is set when
-- the field has none or its resume offset (To of a done record, From of
-- another) is below offset. Returns how many were set.
local key = KEYS[1]
local n = 0
if ARGV[1] == GENS_NONE then call('HDEL', key, POS_GENS) else call('HSET', key, POS_GENS, ARGV[1]) end
for i = 2, #ARGV, 3 do
  local f, off, rec = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local cur = call('HGET', key, f)
  local set = not cur
  if cur then
    local from, to, k, total = string.match(cur, '^(%-?%d+):%-?%d+:(%-?%d+):%-?%d+:(%d+):(%d+):')
    local resume = tonumber(from)
    if k == total then resume = tonumber(to) end
    set = resume == nil or resume < off
  end
  if set then
    call('HSET', key, f, rec)
    n = n + 1
  end
end
return n
