-- standings.lua: sealed standings (see ranking/store/standings.go).
-- KEYS[1] is a snapshot hash <base>:std:{<tag>}:<period> with the fields
-- rev (revision), sum (content digest), gen (the key generation it was
-- read from), json (the payload of revision rev) and pub (the highest
-- revision the publisher's Kafka write was acknowledged for), or, for
-- op "lock", the publisher's lock.
--
-- ARGV[1] op:
--   seal    ARGV gen, sum, json, ttl ms: create revision 0 unless the
--           snapshot exists.
--   revise  ARGV gen, sum, json, ttl ms, expected rev: from a newer
--           generation only; the same sum records the generation, another
--           one stores revision expected+1 (when rev is still expected).
--   pub     ARGV rev: record that revision rev was published.
--   lock    ARGV token, ttl ms: take or renew the lock; 1 when held.
-- seal and revise answer {status, rev, pub, json or ""}: status 1 created
-- or revised, 0 unchanged, -1 the revision moved (read again); json is
-- sent only when pub < rev (something to publish).
local op = nx()
local k = KEYS[1]
if op == 'lock' then
  local token, ttl = nx(), nx()
  if call('GET', k) == token then
    call('PEXPIRE', k, ttl)
    return 1
  end
  if call('SET', k, token, 'NX', 'PX', ttl) then return 1 end
  return 0
end
if op == 'pub' then
  local rev = nx()
  if call('HGET', k, 'rev') == rev then call('HSET', k, 'pub', rev) end
  return 1
end
local gen, sum, json, ttl = tonumber(nx()), nx(), nx(), nx()
local cur = call('HMGET', k, 'rev', 'sum', 'gen', 'pub', 'json')
local function answer(status)
  local rev = tonumber(call('HGET', k, 'rev'))
  local pub = tonumber(call('HGET', k, 'pub') or '-1')
  local body = ''
  if pub < rev then body = call('HGET', k, 'json') end
  return {status, rev, pub, body}
end
if not cur[1] then
  if op ~= 'seal' and op ~= 'revise' then return redis.error_reply('standings: unknown op ' .. tostring(op)) end
  if op == 'revise' and tonumber(A[6]) ~= -1 then return {-1, -1, -1, ''} end
  call('HSET', k, 'rev', 0, 'sum', sum, 'gen', gen, 'json', json, 'pub', -1)
  call('PEXPIRE', k, ttl)
  return answer(1)
end
if op == 'seal' then return answer(0) end
if op ~= 'revise' then return redis.error_reply('standings: unknown op ' .. tostring(op)) end
local expected = tonumber(nx())
if tonumber(cur[3]) >= gen then return answer(0) end
if cur[2] == sum then
  call('HSET', k, 'gen', gen)
  return answer(0)
end
if tonumber(cur[1]) ~= expected then return {-1, tonumber(cur[1]), tonumber(cur[4] or '-1'), ''} end
call('HSET', k, 'rev', expected + 1, 'sum', sum, 'gen', gen, 'json', json)
call('PEXPIRE', k, ttl)
return answer(1)
