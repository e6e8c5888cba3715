-- unlock.lua: release a lock only while it holds our token.
-- KEYS[1] lock key; ARGV[1] token. Returns 1 when released.
if call('GET', KEYS[1]) == ARGV[1] then return call('DEL', KEYS[1]) end
return 0
