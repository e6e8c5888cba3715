package store

import (
	"crypto/sha256"
	"encoding/binary"
)

// Dedupe: how apply.lua remembers message IDs.
//
// A message ID is not stored. Its SHA-256 gives two independent numbers:
// a 64-bit fingerprint, stored as a member of a Redis set of integers
// (an intset: 8 bytes per member), and a 31-bit shard hash that picks
// which set. The sets are grouped in buckets by the time an ID was added
// (Redis' clock), one dedupe TTL wide: an ID is new when neither the
// current nor the previous bucket holds it, and the bucket before those
// is deleted, so an ID is remembered between one and two TTLs. Within a
// bucket the sets form layers of s0·ddGrowth^j sets. New IDs go to
// the last layer; a bucket gets a new layer when the last one holds
// ddLayerAt IDs per set on average, and a new bucket starts with enough
// sets for ddFill IDs each at the count of the previous one (and at least
// WithDedupeMinSets' sets), so a steady stream lands in one right-sized
// layer. An intset stays compact up to
// 512 members (Redis' set-max-intset-entries), far above what the sizing
// puts in a set.
//
// The check is SET NX's: SISMEMBER on the older sets and SADD on the
// current one, in the same script call as the event's updates. A false
// duplicate (a new ID whose fingerprint is already in a set it is checked
// against) drops an event; its probability, per new ID, is the number of
// fingerprints in those sets over 2^64. docs/dedupe.md gives the bound and
// the memory figures.
//
// Old buckets are deleted by the apply calls themselves: ddSweepKeys keys
// per call at most, a sweep every ddSweepMs.
const (
	ddMeta       = "m"   // the buckets' meta hash (after the dedupe prefix)
	ddSweep      = "sw"  // meta: when the next sweep is due (ms)
	ddInc        = "inc" // meta: the last bucket incarnation handed out
	ddDying      = "x"   // meta: + "<bucket>.<inc>": a bucket being deleted
	ddVerdicts   = "v"   // a bucket's verdicts other than applied (after its key base)
	ddCalls      = "c:"  // + call ID: the reply of a call with Decided events (after the dedupe prefix)
	ddFill       = 12    // IDs per set a new bucket is sized for at most (docs/dedupe.md: the false-duplicate bound)
	ddGrowth     = 16    // each layer has this many times the sets of the one before
	ddGrowthBits = 4     // log2(ddGrowth)
	ddLayerAt    = 64    // IDs per set on average that start a new layer
	ddSweepKeys  = 256   // keys a call deletes at most
	ddSweepMs    = 60000 // between two sweeps (at most the TTL)
)

// idKey is where a message ID is held: its shard hash and fingerprint,
// rendered for the script.
type idKey struct {
	sh string // 31 bits in binary digits: a set's index is a suffix (no number formatting in Lua)
	fp int64  // sent in decimal
}

// shDigits is the length of idKey.sh.
const shDigits = 31

// IDKey is what the dedupe keeps of a message ID: the first 12 bytes of
// its SHA-256, which hold its fingerprint (8 bytes) and its shard hash
// (the next 31 bits). Two IDs of a replay's range with the same IDKey
// (probability n²/2^97 for n IDs) would count as one.
type IDKey [12]byte

// KeyOf returns the IDKey of a message ID.
func KeyOf(id string) IDKey {
	h := sha256.Sum256([]byte(id))
	return IDKey(h[:12])
}

func (k IDKey) fp() int64     { return int64(binary.BigEndian.Uint64(k[0:8])) }
func (k IDKey) shard() uint32 { return binary.BigEndian.Uint32(k[8:12]) >> 1 }

// dedupeHash writes the shard hash of a message ID to sh, as idKey.sh
// (31 binary digits, most significant first), and returns its fingerprint.
func dedupeHash(id string, sh *[shDigits]byte) (fp int64) {
	k := KeyOf(id)
	for i, x := len(sh)-1, k.shard(); i >= 0; i, x = i-1, x>>1 {
		sh[i] = '0' + byte(x&1)
	}
	return k.fp()
}
