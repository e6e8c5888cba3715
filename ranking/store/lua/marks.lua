-- marks.lua: raise the latest stream time mark of partitions.
-- KEYS[1]  <prefix>:wm:last, a hash: "<topic>|<partition>" -> "<offset>:<stream ms>:<written ms>"
-- ARGV     lastMarkArgs (contract.go), one after another
-- A field is set only when its offset is beyond the stored one, so a
-- writer behind another (a live batch applied again after a rebalance, a
-- replay's switch raising partitions that live consumption passed) never
-- moves a partition's latest mark back (nor refreshes its write time,
-- which tells an idle partition). Written by the root store's applies on
-- a cluster and by Store.RaisePositions; apply.lua raises it itself.
local key = KEYS[1]
while pos <= #A do
  local m = {f = nx(), off = nn(), v = nx()}
  local cur = call('HGET', key, m.f)
  local old = -1
  if cur then old = tonumber(string.match(cur, '^(-?%d+)')) or -1 end
  if m.off > old then call('HSET', key, m.f, m.v) end
end
return 0
