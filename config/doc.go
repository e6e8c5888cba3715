// Package config loads rankd's YAML configuration: the Kafka, Redis, HTTP and
// rollover settings, the event schemas per topic, the boards and the routing
// rules.
//
// Load is strict and complete: unknown keys, bad values and inconsistent
// boards or routes are all reported at once, sorted by position, each as
// "file:line:column: field: message" (an *Error). A Config that Load returns
// is valid: its boards pass ranking.Board.Validate (normalized by
// Board.Normalize) and its routes compile into an ingest.Router.
//
// YAML anchors, aliases and merge keys (<<) work; top-level keys starting
// with "x-" are ignored, to hold shared settings.
//
// Precedence: built-in defaults (defaults, which takes them from the
// packages that own them, and ranking.NewBoard), then the file, then the
// environment (the Env* constants: RANKD_KAFKA_BROKERS, RANKD_REDIS_ADDR,
// RANKD_REDIS_ADDRS, RANKD_REDIS_PASSWORD, RANKD_HTTP_LISTEN). Time zones
// come from the embedded IANA database, so they resolve the same on
// machines without /usr/share/zoneinfo.
package config
