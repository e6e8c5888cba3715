// Package ranking is rankd's model, with no I/O: boards (Board, Window,
// Aggregate, Tiebreak), period calendars (Calendar, Period), score codecs
// (Codec: value and tie time packed into one exact Redis score) and the
// update a routed event makes to one board (Update).
//
// The flow of an event through rankd, one package per step:
//
//	Kafka -> consumer -> ranking/ingest -> ranking/store -> ranking/httpapi
//	         (fetch,      (decode,         (Apply: dedupe,   (read boards
//	          batch,       validate,        judge, write;     over HTTP)
//	          commit)      route to         queries,
//	                       Updates)         rollover)
//
// config loads a file into these types; cmd/rankd wires the steps.
// The exact semantics of applying updates are the contract of
// ranking/store (its package documentation), checked against the
// in-memory oracle in internal/testenv/oracle.
package ranking
