-- standings.lua: sealed standings (see ranking/store/standings.go).
-- KEYS[1] is a snapshot hash <base>:std:{<tag>}:<period> with the fields
-- rev (revision), sum (content digest), gen (the key generation it was
-- read from), json (the payload of revision rev) and pub (the highest
-- revision the publisher's Kafka write was acknowledged for), or, for
-- op "lock", the publisher's lock.
--
-- KEYS and ARGV: standingsArgs (contract.go), an op and what it takes:
--   seal    gen, sum, json, ttl ms: create revision 0 unless the snapshot
--           exists.
--   revise  gen, sum, json, ttl ms, expected rev: from a newer generation
--           only; the same sum records the generation, another one stores
--           revision expected+1 (when rev is still expected).
--   pub     rev: record that revision rev was published.
--   lock    token, ttl ms: take or renew the lock; 1 when held.
-- seal and revise answer {status, rev, pub, json or ""}: status 1 created
-- or revised, 0 unchanged, -1 the revision moved (read again); json is
-- sent only when pub < rev (something to publish).
local k = KEYS[1]
local S = {op = nx(), token = nx(), ttl = nx(), gen = nx(), sum = nx(), json = nx(), rev = nx()}
local op = S.op
if op == SNAP_OP_LOCK then
  local token, ttl = S.token, S.ttl
  if call('GET', k) == token then
    call('PEXPIRE', k, ttl)
    return 1
  end
  if call('SET', k, token, 'NX', 'PX', ttl) then return 1 end
  return 0
end
if op == SNAP_OP_PUB then
  local rev = S.rev
  if call('HGET', k, SNAP_REV) == rev then call('HSET', k, SNAP_PUB, rev) end
  return 1
end
local gen, sum, json, ttl = tonumber(S.gen), S.sum, S.json, S.ttl
local cur = call('HMGET', k, SNAP_REV, SNAP_SUM, SNAP_GEN, SNAP_PUB, SNAP_JSON)
local function answer(status)
  local rev = tonumber(call('HGET', k, SNAP_REV))
  local pub = tonumber(call('HGET', k, SNAP_PUB) or '-1')
  local body = ''
  if pub < rev then body = call('HGET', k, SNAP_JSON) end
  return {status, rev, pub, body}
end
if not cur[1] then
  if op ~= SNAP_OP_SEAL and op ~= SNAP_OP_REVISE then return redis.error_reply('standings: unknown op ' .. tostring(op)) end
  if op == SNAP_OP_REVISE and tonumber(S.rev) ~= -1 then return {-1, -1, -1, ''} end
  call('HSET', k, SNAP_REV, 0, SNAP_SUM, sum, SNAP_GEN, gen, SNAP_JSON, json, SNAP_PUB, -1)
  call('PEXPIRE', k, ttl)
  return answer(1)
end
if op == SNAP_OP_SEAL then return answer(0) end
if op ~= SNAP_OP_REVISE then return redis.error_reply('standings: unknown op ' .. tostring(op)) end
local expected = tonumber(S.rev)
if tonumber(cur[3]) >= gen then return answer(0) end
if cur[2] == sum then
  call('HSET', k, SNAP_GEN, gen)
  return answer(0)
end
if tonumber(cur[1]) ~= expected then return {-1, tonumber(cur[1]), tonumber(cur[4] or '-1'), ''} end
call('HSET', k, SNAP_REV, expected + 1, SNAP_SUM, sum, SNAP_GEN, gen, SNAP_JSON, json)
call('PEXPIRE', k, ttl)
return answer(1)
