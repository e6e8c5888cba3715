-- gens.lua: the key generations of every board, and the replay lock.
-- One hash, KEYS[1] = <prefix>:gens, with fields
--   a:<board>  the generation readers and writers use (absent: 0)
--   b:<board>  the generation a replay is building (absent: none)
--   d:<board>  generations of the board left to delete (comma list): the old
--              active one at a switch, a dead replay's build at the next build
--   next       the last generation number handed out
--   lock       "<token>|<expires ms>" of the replay that builds
-- Generations being built count only while the lock is held: a replay that
-- died stops the dual writes into its generation when its lock expires.
--
-- KEYS and ARGV: gensArgs (contract.go): the op, the lock's token and TTL,
-- a generation, the boards; each op reads what it takes:
--   read                 -> flat list: next (0: none), then board, active, building (-1: none), ...
--   lock token ttl       -> 1 when the lock is (now) ours, else the holder's "token|expires"
--   renew token ttl      -> 1; error REPLAYLOCK when the lock is not ours (taken by
--                           another, or gone: Redis lost it)
--   unlock token         -> 1 when released
--   reserve token boards -> a new generation, listed in d: of each board (so
--                           that the next replay drops it if this one dies) but not
--                           built: live writers do not know of it
--   build token gen boards -> {generation, board, previous b: (or -1), ...}; sets
--                           b:<board> for each (the previous ones are left to the caller to
--                           drop); gen "0": a new generation, else one reserved (taken off d:)
--   switch token gen boards -> 1; a:<board> = gen, b:<board> removed, the old
--                           a: added to d:, for each board whose b: is gen
--                           (error when the lock is not ours, or REPLAYLOST when a
--                           board's b: is not gen: Redis lost the build's mark)
--   pending              -> flat list: board, d: list
--   dropped token gen board -> 1; gen removed from d:<board>
local key = KEYS[1]
local G = {op = nx(), token = nx(), ttl = nn(), gen = nx(), nb = nn()}
local boards = {}
for i = 1, G.nb do boards[i] = nx() end
local op = G.op
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function holder()
  local l = redis.call('HGET', key, GENS_LOCK)
  if not l then return nil, 0 end
  local sep = string.find(l, '|', 1, true)
  local exp = tonumber(string.sub(l, sep + 1))
  if exp <= now then return nil, 0 end
  return string.sub(l, 1, sep - 1), exp
end

local function pend(board, g)
  local f = GENS_DROP .. board
  local cur = redis.call('HGET', key, f)
  if cur then redis.call('HSET', key, f, cur .. ',' .. g) else redis.call('HSET', key, f, g) end
end

local function unpend(board, g)
  local f = GENS_DROP .. board
  local cur = redis.call('HGET', key, f)
  if cur then
    local left = {}
    for x in string.gmatch(cur, '[^,]+') do
      if x ~= g then left[#left + 1] = x end
    end
    if #left == 0 then redis.call('HDEL', key, f) else redis.call('HSET', key, f, table.concat(left, ',')) end
  end
end

local function mine(token)
  local h = holder()
  if h ~= token then return redis.error_reply('REPLAYLOCK the replay lock is not held by this replay') end
  return nil
end

if op == GENS_OP_READ then
  local h = holder()
  local all = redis.call('HGETALL', key)
  local act, bld, order = {}, {}, {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local kind, board = string.sub(f, 1, 2), string.sub(f, 3)
    if kind == GENS_ACTIVE or kind == GENS_BUILD then
      if act[board] == nil and bld[board] == nil then order[#order + 1] = board end
      if kind == GENS_ACTIVE then act[board] = v else bld[board] = v end
    end
  end
  local out = {redis.call('HGET', key, GENS_NEXT) or '0'}
  for _, board in ipairs(order) do
    local b = bld[board]
    if b == nil or h == nil then b = '-1' end
    out[#out + 1] = board
    out[#out + 1] = act[board] or '0'
    out[#out + 1] = b
  end
  return out
elseif op == GENS_OP_LOCK then
  local token, ttl = G.token, G.ttl
  local h = holder()
  if h ~= nil and h ~= token then return redis.call('HGET', key, GENS_LOCK) end
  redis.call('HSET', key, GENS_LOCK, token .. '|' .. string.format('%d', now + ttl))
  return 1
elseif op == GENS_OP_RENEW then
  local e = mine(G.token); if e then return e end
  redis.call('HSET', key, GENS_LOCK, G.token .. '|' .. string.format('%d', now + G.ttl))
  return 1
elseif op == GENS_OP_UNLOCK then
  if holder() == G.token then redis.call('HDEL', key, GENS_LOCK); return 1 end
  return 0
elseif op == GENS_OP_RESERVE then
  local e = mine(G.token); if e then return e end
  local g = redis.call('HINCRBY', key, GENS_NEXT, 1)
  for _, b in ipairs(boards) do pend(b, tostring(g)) end
  return g
elseif op == GENS_OP_BUILD then
  local e = mine(G.token); if e then return e end
  local g = G.gen
  if g == '0' then
    g = tostring(redis.call('HINCRBY', key, GENS_NEXT, 1))
  elseif tonumber(g) > tonumber(redis.call('HGET', key, GENS_NEXT) or '0') then
    return redis.error_reply('REPLAYLOST generation ' .. g .. ' was never reserved: Redis lost writes')
  end
  local out = {tonumber(g)}
  for _, b in ipairs(boards) do
    local old = redis.call('HGET', key, GENS_BUILD .. b)
    out[#out + 1] = b
    out[#out + 1] = old or '-1'
    if old then pend(b, old) end
    unpend(b, g)
    redis.call('HSET', key, GENS_BUILD .. b, g)
  end
  return out
elseif op == GENS_OP_SWITCH then
  local e = mine(G.token); if e then return e end
  local g = G.gen
  for _, b in ipairs(boards) do
    if redis.call('HGET', key, GENS_BUILD .. b) ~= g and redis.call('HGET', key, GENS_ACTIVE .. b) ~= g then
      return redis.error_reply('REPLAYLOST generation ' .. g .. ' of ' .. b .. ' is no longer being built: Redis lost writes')
    end
  end
  for _, b in ipairs(boards) do
    if redis.call('HGET', key, GENS_BUILD .. b) == g then
      pend(b, redis.call('HGET', key, GENS_ACTIVE .. b) or '0')
      redis.call('HSET', key, GENS_ACTIVE .. b, g)
      redis.call('HDEL', key, GENS_BUILD .. b)
    end
  end
  return 1
elseif op == GENS_OP_PENDING then
  local all = redis.call('HGETALL', key)
  local out = {}
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == GENS_DROP then
      out[#out + 1] = string.sub(all[i], 3)
      out[#out + 1] = all[i + 1]
    end
  end
  return out
elseif op == GENS_OP_DROPPED then
  local e = mine(G.token); if e then return e end
  unpend(boards[1], G.gen)
  return 1
end
return redis.error_reply('gens.lua: unknown op ' .. tostring(op))
