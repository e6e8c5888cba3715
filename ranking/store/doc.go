// Package store is rankd's Redis store: it applies board updates atomically
// (ranking.Update, grouped into events by message ID) with Lua scripts,
// dedupes message IDs, keeps stream-time marks, rolls rolling boards over
// (RunRollover), reports finality (RunFinality), manages key generations
// for `rankd replay`, and answers the queries of ranking/httpapi. Key
// layout: keys.go; the scripts: lua/, each behind one prelude generated
// from contract.go, the typed Go<->Lua contract (every script's KEYS and
// ARGV layout, reply codes, key parts and fields), which TestLuaContract
// holds against every script.
//
// # Exact semantics (the contract the oracle in internal/testenv/oracle checks)
//
// Store.Apply (and ApplyFrom, for live consumption) takes events: an Event
// is one message's ID and its ranking.Updates (Group forms them from a
// flat list, consecutive updates with the same MsgID being one event). An
// event whose ID was already applied (within the dedupe TTL, see
// docs/dedupe.md) is a duplicate: none of its updates is applied; each
// reports StatusDuplicate, except that an update whose first delivery was
// late or out of range reports that verdict again with Result.Repeated set
// (so a redelivered message is dead-lettered again rather than lost, and
// counted once). Updates are judged in input order, per stream = (board,
// dims):
//
//  1. Period: j = board calendar At(update.Time); total boards have one
//     period, "all".
//  2. Late: an update of period j is late when its StreamTime (the stream
//     time of the partition its event came from: the greatest event time
//     of the valid messages at lower offsets) is set and StreamTime >=
//     j.End + board.Grace. A late update is not applied and is reported
//     with StatusLate. Total boards are never late. The verdict depends on
//     the update alone, so it is a function of the log: no other
//     partition, worker count, batch boundary or restart can change it.
//  3. Range: an update whose result would leave the board's exact range
//     (Codec.MaxValue; for sum boards the member's value in period j after
//     adding base and delta; for rolling boards the per-period bound is
//     MaxValue/N so the window sum always fits) or whose tie time does not fit
//     (total boards: a tie offset from TieEpoch outside [0, 2^TieBits)) is reported with
//     StatusOutOfRange and not applied. On keep_top sum boards a delta <= 0 is
//     out of range (keep_top needs updates that never lower a member).
//  4. Apply to member m of period j:
//     - sum: absent -> value = base + delta; present -> value += delta.
//     tie = max(tie, t). On boards with base, base is the update's Base (0
//     when it carries none) and the member keeps the greatest base of its
//     updates: an update with a greater base than the kept one also adds
//     the difference. So the value is max(base) + sum(delta) whatever the
//     order (and it never goes down through a base, as keep_top needs).
//     - max: absent, or v > value -> value = v, tie = t; v == value -> tie =
//     min(tie, t). min: symmetric.
//     - last: the update with the greatest (Time, MsgID) wins: the latest
//     event time, compared in exact milliseconds; only equal milliseconds
//     fall back to the larger MsgID (bytewise). tie = the winner's Time. The
//     TieUnit only rounds that tie time in the score, never which update
//     wins.
//  5. Rolling boards: S(k)[m] = sum of P(i)[m] for i in [k-N+1, k], present
//     when m is present in any of them; its tie is the max of their ties.
//  6. keep_top K: the sorted set holds the top K members of the full board
//     (Redis order among equal encoded scores); every member's exact encoded
//     score is kept in a hash.
//
// Scores in Redis are Codec-encoded: value * 2^TieBits + tie part, so equal
// values are ordered by tie time and every score stays within the 53-bit
// exact range of a double.
package store
