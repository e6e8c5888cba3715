// Package httpapi serves rankd's boards over HTTP: a read-only JSON API and a
// small built-in HTML page that shows any board's top 20 (page.go: rendered
// by the server from the same cached /top read, refreshed by a little JS;
// URL parameters board, period and dims; times in the board's zone).
//
// Routes (all GET or HEAD; responses carry Cache-Control: no-store, except
// the board reads the cache serves, WithCache: max-age of its TTL):
//
//	/v1/boards                                   declared boards, current and previous period ids
//	/v1/boards/{board}/dims                      the board's dims values with members in a period, paged
//	/v1/boards/{board}/top                       the first limit members, or the top percent
//	/v1/boards/{board}/members/{member}          one member's standing and trend
//	/v1/boards/{board}/members/{member}/around   n members each side of one member
//	/                                            the HTML page (?board=&period=&dims=)
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
//     "dense" (1, 2, 2, 3); see store.RankMode.
//   - limit (top): 1..1000, default 20. n (around): 0..500, default 5.
//   - percent (top, instead of limit): the top P% of the board, P a decimal
//     number in 0.01..100 with at most 2 decimals ("3", "0.5", "12.25"): the
//     first ceil(count * P / 100) members in row order (members tied at the
//     cut are cut by the sort order, as in any page), where count is the
//     board's members (on keep_top boards the kept-scores count: the page
//     then lists at most the keep_top members of the sorted set, with
//     "complete": false). The count is read first (ZCARD, with HLEN on
//     keep_top boards), then the page as for limit; the page's "count" is
//     read again with it, so a write in between may make them differ. More
//     than 1000 members (a page) is 400 bad_request; with limit, 400 too.
//     The response has "percent", as given (normalised: "50.0" gives 50).
//   - limit (dims): 1..1000, default 100. cursor (dims): the next_cursor of
//     the previous page, absent for the first page; any other value is 400
//     bad_request.
//   - trend (top, around): "1" adds every entry's rank in the previous period
//     and its trend.
//
// Dims values must exist: on a board with dims, /top, /around and /members
// answer 404 unknown_dims for dims values that are not in the board's dims
// registry (values never written, or whose data expired and was pruned;
// one SISMEMBER), while known values with nothing in the period answer 200
// with no entries (/members and /around: 404 not_found). A value written
// again after its registration was pruned is registered again within a
// minute.
//
// /dims answers {"board", "period", "dims": [{"dims": {name: value, ...},
// "count": n}, ...], "next_cursor"}: the dims values (in the board's dims
// order; {} for a board without dims) whose sorted set of the period exists,
// each with its member count ("count" as in /top: keep_top boards count the
// kept scores). Values come in no particular order. A page holds at most
// limit values, possibly fewer, even none, while next_cursor is present: the
// listing is done when a page has no next_cursor. A value present for the
// whole listing is listed once (rarely twice, if the registry is resized
// meanwhile); one added or removed meanwhile may or may not be. Counts of a
// rolling board's period are read as the rollover timer built them: /dims
// never completes a rollover, so a started period whose rollover is late
// may show old counts or miss values.
//
// /members has "percentile": the share of the board's members whose value
// is the same as or worse than the member's, in percent, rounded down to 2
// decimals: floor(10000 * (count - better) / count) / 100, where better is
// the number of members with a strictly better decoded value (the
// competition rank - 1) and count the response's "count". It is 100 for the
// best value, equal values share it, and it does not depend on rank. It is
// exact except for a keep_top member outside the sorted set ("rank_approx":
// true), for which it is an upper bound (better counts only the set).
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
//   - on a board with dims, one SISMEMBER of the dims registry (/top,
//     /around, /members); with percent, one more ZCARD (and HLEN);
//   - /members: one ZCOUNT for the percentile (none with rank=competition);
//   - /dims: at most 20 SSCANs of the registry (COUNT 100 each) and one
//     ZCARD (and on keep_top boards one HLEN) for each of at most 1,000
//     registry values looked at (500 on keep_top boards), in one pipeline
//     per SSCAN batch;
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
// scripts), each O(log n) or reading at most 1,001 entries. The costliest
// read, a page of 1,000 with dense previous ranks (/top?limit=1000&
// rank=dense&trend=1), cost 6.3-9.5 ms of Redis CPU on boards of 200k and
// 1M members in `rankd bench`'s cost phase on a 2-core machine (the cost
// model says 6.4-6.8 ms of the work it counts, the estimate up front
// 7.3-7.6 ms); a top 20 costs 30-55 µs, a member 85-250 µs. The one
// exception is the rollover of a rolling board that a read of a started
// period completes when the timer is late (chunks of about 128 members,
// 1-2 ms each); it is cut by the timeout like any other work and resumes
// where it stopped at the next read.
//
// Every request's Redis work is bounded in time as well (WithTimeout,
// default 2 s): when the time is up the request is answered 503 timeout and
// its store calls are cancelled, so no further command is sent. Expensive
// reads (rank=dense on /around and /members, and on /top with trend=1;
// trend=1 on more than 100 entries, which trend=1 with percent counts as)
// are served at most 2 at a time
// (WithExpensiveLimit); one that finds no slot within 100 ms is answered
// 503 overloaded. Both 503s carry Retry-After: 1.
//
// # Serving under load
//
// A cache hit is served before any routing (ServeHTTP's first step, and
// FastCachedServer for fasthttp, the server rankd runs), from bytes and
// header values prepared when the entry was stored: about 0.3 µs of the
// handler's own work, no allocation (BenchmarkCachedRead); the rest of
// what a hit costs the process is the server's parsing and header writing
// and the system calls (see the README's benchmarks). With WithPriority
// the API slows the responses it starts while the consumer is behind, so
// that readers never take the consumer's CPU (priority.go).
//
// # Errors
//
// Errors are JSON {"error": "...", "code": "..."}: 404 unknown_board,
// unknown_dims (dims values the board has no data for) and not_found
// (member absent, unknown route), 400 bad_dims, bad_period, bad_request
// (limit, n, rank, trend, percent, cursor) and too_expensive (see above), 405
// method_not_allowed. Bad input never gives a 5xx: 503 "unavailable" (with
// Retry-After) means Redis could not be reached, is loading, or a rolling
// board is being rolled over elsewhere; 503 "timeout" and "overloaded" are
// the limits above; 500 "internal" is any other store failure. Unavailable
// and internal are logged as errors, timeouts as warnings.
package httpapi
