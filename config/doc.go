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
// Print writes a resolved config as `rankd config check` shows it.
//
// Precedence: built-in defaults (the Default* constants of this package,
// which internal/assembly's TestDefaultsAgree holds equal to those consumer
// and store keep for callers without a config; ingest's decoding limits;
// ranking.NewBoard), then the file, then the
// environment (the Env* constants, listed by EnvNames). Secrets
// (passwords, the HTTP token) come from the environment or from files
// named in the config; a secret written in the config file is refused.
// Time zones come from the embedded IANA database, so they resolve the
// same on machines without /usr/share/zoneinfo.
package config
