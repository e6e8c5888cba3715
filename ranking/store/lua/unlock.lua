-- unlock.lua: release a lock only while it holds our token.
-- KEYS and ARGV: unlockArgs (contract.go). Returns 1 when released.
local key = KEYS[1]
local U = {token = nx()}
if call('GET', key) == U.token then return call('DEL', key) end
return 0
