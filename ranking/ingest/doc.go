// Package ingest turns Kafka messages into board updates: it decodes a
// message against its topic's Schema (JSON scanning, field types, bounds,
// the event-time floor and future skew), judges it (PermanentError with a
// Reason, the label of its dead letter) and routes the decoded Event
// through the compiled routing rules (Router: expr-lang expressions for
// the condition, member, dims and value) to the ranking.Updates it makes.
//
// Everything here is a pure function of the message and the config: no
// Redis, no clock but the one a Schema is given. The store (ranking/store)
// judges what needs state: duplicates, lateness, range.
package ingest
