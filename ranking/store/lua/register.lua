-- register.lua: holds the message IDs a replay decided (store.RegisterIDs)
-- in the dedupe sets of a generation that only the replay writes, as
-- apply.lua would have held them one by one (dedupe.go): the current
-- bucket's last layer, the set a suffix of the shard hash picks, and the
-- verdict of each event not all applied.
--
-- KEYS[1]  meta: the dedupe meta hash of the generation
-- ARGV     registerArgs (contract.go), then for add: nGroups x (set
--          suffix, nIDs, nIDs x fingerprint), nVerdicts x (fingerprint,
--          verdict)
-- open  -> {bucket, incarnation, layer, bits}: the current bucket (Redis'
--          clock), made anew with enough sets for n IDs (DD_FILL a set,
--          at least min) when it is new or holds no ID yet; bits is the
--          length of its last layer's set suffixes
-- add   -> the IDs added; error DDMOVED when the bucket is no longer the
--          current or the previous one (or was made anew): the caller
--          opens again
local meta = KEYS[1]
local R = {op = nx(), dprefix = nx(), ttl = nn(), min = nn(), n = nn(), bucket = nx(), inc = nx(), layer = nx()}
local tm = call('TIME')
local now = tonumber(tm[1]) * 1000 + floor(tonumber(tm[2]) / 1000)
local cur = floor(now / R.ttl)

local function parse(d)
  local inc, s0, l, n, t = string.match(d, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
  return inc, tonumber(s0), tonumber(l), tonumber(n), tonumber(t)
end

if R.op == REG_OP_OPEN then
  local d = call('HGET', meta, int(cur))
  local inc, s0, l, n, t
  if d then inc, s0, l, n, t = parse(d) end
  if not d or t == 0 then
    s0 = R.min
    while s0 * DD_FILL < R.n do s0 = s0 * 2 end
    inc, l = int(call('HINCRBY', meta, DD_INC, 1)), 1
    call('HSET', meta, int(cur), inc .. ':' .. int(s0) .. ':1:0:0')
  end
  local bits = 0
  while 2 ^ bits < s0 do bits = bits + 1 end
  return {int(cur), inc, l, bits + (l - 1) * DD_GROWTH_BITS}
end

-- add
local d = call('HGET', meta, R.bucket)
if not d or tonumber(R.bucket) < cur - 1 then
  return redis.error_reply('DDMOVED bucket ' .. R.bucket .. ' is no longer current')
end
local inc, s0, l, n, t = parse(d)
if inc ~= R.inc or int(l) ~= R.layer then
  return redis.error_reply('DDMOVED bucket ' .. R.bucket .. ' was made anew')
end
local kb = R.dprefix .. R.bucket .. '.' .. inc .. '.'
local lk = kb .. R.layer .. ':'
local added = 0
for _ = 1, nn() do
  local suffix, c = nx(), nn()
  added = added + call('SADD', lk .. suffix, unpack(A, pos, pos + c - 1))
  pos = pos + c
end
local vs = {}
for _ = 1, nn() do
  vs[#vs + 1] = nx()
  vs[#vs + 1] = nx()
end
many('HSET', kb .. DD_VERDICTS, vs)
call('HSET', meta, R.bucket, inc .. ':' .. int(s0) .. ':' .. int(l) .. ':' .. int(n + added) .. ':' .. int(t + added))
return added
