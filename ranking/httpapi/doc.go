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
//     boards are readable up to the period after the current one. Reading a
//     rolling period that has started completes its rollover first if the
//     timer has not (so the current period is exact even when the timer is
//     late); reading one that has not started writes nothing: it answers
//     from what the rollover timer has built so far, with "complete": false
//     (and "rank_approx": true if any entry is listed) until the timer's
//     prefill of that period has run.
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
// # Cost of a request
//
// Every request has a bounded Redis cost, whatever its parameters and the
// size or shape of the board. Besides a few O(1) or O(log n) commands (the
// board's generation and the partitions' marks, each read at most once a
// second; the set's size; a member's score and position), one request runs
// at most:
//
//   - one range read of at most 1,001 entries (the page), and with trend=1
//     one ZMSCORE of the page's members in the previous period;
//   - rank=competition: one ZCOUNT for /around's first entry and /members,
//     and with trend=1 one ZCOUNT per distinct previous value of the page
//     (at most 1,001, in one pipeline);
//   - rank=row with trend=1: one ZREVRANK (ZRANK) per entry, in one pipeline;
//   - rank=dense: walks over the distinct values better than the ranks
//     sought (one script each, one O(log n) look-up per value) that visit at
//     most 1,000 values in total per request (WithDenseBudget). Ranks in the
//     page's own period get at most half of that: beyond, the rank shown is
//     a lower bound and "rank_approx" is true. Ranks in the previous period
//     (trend=1, /members' prev_rank) must be exact: beyond the budget the
//     request is refused with 400 too_expensive.
//
// That is at most about 1,030 Redis commands (counting those run inside
// scripts), each O(log n) or reading at most 1,001 entries: about 5 ms of
// Redis time on a 1M-member board. The one exception is the rollover of a
// rolling board that a read of a started period completes when the timer is
// late (chunks of 250 members, about 1 ms each); it is cut by the timeout
// like any other work and resumes where it stopped at the next read.
//
// Every request's Redis work is bounded in time as well (WithTimeout,
// default 2 s): when the time is up the request is answered 503 timeout and
// its store calls are cancelled, so no further command is sent. Expensive
// reads (rank=dense on /around and /members, and on /top with trend=1;
// trend=1 on more than 100 entries) are served at most 2 at a time
// (WithExpensiveLimit); one that finds no slot within 100 ms is answered
// 503 overloaded. Both 503s carry Retry-After: 1.
//
// # Errors
//
// Errors are JSON {"error": "...", "code": "..."}: 404 unknown_board and
// not_found (member absent, unknown route), 400 bad_dims, bad_period,
// bad_request (limit, n, rank, trend) and too_expensive (see above), 405
// method_not_allowed. Bad input never gives a 5xx: 503 "unavailable" (with
// Retry-After) means Redis could not be reached, is loading, or a rolling
// board is being rolled over elsewhere; 503 "timeout" and "overloaded" are
// the limits above; 500 "internal" is any other store failure. Unavailable
// and internal are logged as errors, timeouts as warnings.
package httpapi
