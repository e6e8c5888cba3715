-- register.lua: holds the message IDs a replay decided (store.RegisterIDs)
-- in the dedupe sets of a generation that only the replay writes, as
-- apply.lua would have held them one by one (dedupe.go): a bucket's last
-- layer, the set a suffix of the shard hash picks, and the verdict of each
-- event not all applied.
--
-- KEYS[1]  meta: the dedupe meta hash of the generation
-- ARGV     registerArgs (contract.go)
-- open  -> {bucket, incarnation, layer, bits}: the bucket asked for, the
--          current (Redis' clock) or the previous one, made anew with
--          enough sets for n IDs (DD_FILL a set, at least min) when it is
--          new or holds no ID yet; bits is the length of its last layer's
--          set suffixes. The caller then adds the IDs with plain SADDs to
--          its sets and HSETs their verdicts (keys named as apply.lua names
--          them: Store.registerIn). Error DDMOVED when the bucket is
--          neither (the caller reads the clock again)
-- count -> n: counts the n IDs the caller added in the bucket's meta; error
--          DDMOVED when the bucket is no longer the current or the
--          previous one (or was made anew): the caller opens again
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
  local b = tonumber(R.bucket)
  if b ~= cur and b ~= cur - 1 then
    return redis.error_reply('DDMOVED bucket ' .. R.bucket .. ' is neither the current nor the previous one')
  end
  local d = call('HGET', meta, int(b))
  local inc, s0, l, n, t
  if d then inc, s0, l, n, t = parse(d) end
  if not d or t == 0 then
    s0 = R.min
    while s0 * DD_FILL < R.n do s0 = s0 * 2 end
    inc, l = int(call('HINCRBY', meta, DD_INC, 1)), 1
    call('HSET', meta, int(b), inc .. ':' .. int(s0) .. ':1:0:0')
  end
  local bits = 0
  while 2 ^ bits < s0 do bits = bits + 1 end
  return {int(b), inc, l, bits + (l - 1) * DD_GROWTH_BITS}
end

-- count: the caller added R.n IDs (plain SADDs into the bucket's sets)
local d = call('HGET', meta, R.bucket)
if not d or tonumber(R.bucket) < cur - 1 then
  return redis.error_reply('DDMOVED bucket ' .. R.bucket .. ' is no longer current')
end
local inc, s0, l, n, t = parse(d)
if inc ~= R.inc or int(l) ~= R.layer then
  return redis.error_reply('DDMOVED bucket ' .. R.bucket .. ' was made anew')
end
call('HSET', meta, R.bucket, inc .. ':' .. int(s0) .. ':' .. int(l) .. ':' .. int(n + R.n) .. ':' .. int(t + R.n))
return R.n
