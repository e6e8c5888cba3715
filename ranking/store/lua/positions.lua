-- positions.lua: raise partitions' position records (Store.RaisePositions),
-- after a replay's switch.
-- KEYS[1]  <base>:pos, a hash: "<topic>|<partition>" -> record (position.go)
-- ARGV     raiseHeadArgs, then raiseArgs, one after another (contract.go)
-- The gens counter (the gens hash's "next" as the caller read it) becomes
-- the last one seen (POS_GENS; GENS_NONE removes it, GENS_KEEP leaves it:
-- a cluster's live records, Store.writePositions). A record is set when
-- the field has none or its resume offset (To of a done record, From of
-- another) is below offset. Returns how many were set.
local key = KEYS[1]
local H = {gens = nx()}
local n = 0
if H.gens == GENS_NONE then call('HDEL', key, POS_GENS) elseif H.gens ~= GENS_KEEP then call('HSET', key, POS_GENS, H.gens) end
while pos <= #A do
  local r = {f = nx(), off = nn(), rec = nx()}
  local cur = call('HGET', key, r.f)
  local set = not cur
  if cur then
    local from, to, k, total = string.match(cur, '^(%-?%d+):%-?%d+:(%-?%d+):%-?%d+:(%d+):(%d+):')
    local resume = tonumber(from)
    if k == total then resume = tonumber(to) end
    set = resume == nil or resume < r.off
  end
  if set then
    call('HSET', key, r.f, r.rec)
    n = n + 1
  end
end
return n
