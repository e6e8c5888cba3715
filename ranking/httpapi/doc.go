// Package httpapi serves rankd's boards over HTTP: a read-only JSON API and a
// small built-in HTML page that shows any board's top 20.
//
// Routes (all GET; responses carry Cache-Control: no-store):
//
//	/v1/boards                                   declared boards, current and previous period ids
//	/v1/boards/{board}/top                       the first limit members
//	/v1/boards/{board}/members/{member}          one member's standing and trend
//	/v1/boards/{board}/members/{member}/around   n members each side of one member
//	/                                            the HTML page
//
// Query parameters:
//
//   - dims: the board's dims values as name:value pairs joined by ",", in any
//     order, e.g. dims=zone:3,room:7. The query is split on "," and on the
//     first ":" of each pair before percent-decoding, so a value may hold ":"
//     as is and "," as %2C. Every dim of the board must be given, and no other.
//   - period: "current" (default), "previous" or a period id of the board
//     ("20261121", "20261121T1330", "2026W47", "202611", "all"). Rolling
//     boards are readable up to the period after the current one: reading a
//     period rolls the board over up to it.
//   - rank: "row" (default; 1, 2, 3, 4), "competition" (1, 2, 2, 4) or
//     "dense" (1, 2, 2, 3); see ranking.RankMode.
//   - limit (top): 1..1000, default 20. n (around): 0..500, default 5.
//   - trend (top, around): "1" adds every entry's rank in the previous period
//     and its trend.
//
// Values are decoded: an entry's "value" is the board's fixed-point value as
// an exact decimal JSON number (raw / 10^decimals) and "raw" is the integer
// stored. Boards with a tiebreak show "tie_time", the instant the member's
// tie was taken at, in RFC 3339 (UTC, in the board's tie unit); multi-factor
// boards show "factors", the unpacked sort key in declaration order.
//
// Errors are JSON {"error": "...", "code": "..."}: 404 unknown_board and
// not_found (member absent, unknown route), 400 bad_dims, bad_period and
// bad_request (limit, n, rank, trend), 405 method_not_allowed. Bad input never
// gives a 5xx: 503 "unavailable" (with Retry-After) means Redis could not be
// reached, is loading, or a rolling board is being rolled over elsewhere;
// 500 "internal" is any other store failure. Both are logged.
package httpapi
