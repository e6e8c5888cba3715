// Package assembly builds a running rankd from a config.Config: the Redis
// client (standalone, cluster or Sentinel, with its TLS and ACL settings),
// the store, the consumer with its ranking sink, the rollover and
// finality timers and the HTTP servers (API, page, /metrics, and the
// health and readiness of health.go: /healthz, /readyz from the consumer's
// NotReady and a background Redis ping). `rankd run`, `rankd dev`, `rankd
// bench`, `rankd replay` (NewRebuild), `rankd rollover` and the tests use
// it, so that none of them wires the parts again: what runs in a test is
// what runs in production. NewLogger is every command's logger, and
// go-redis's.
//
// New connects to nothing; Stack.Listen opens the HTTP addresses (a taken
// port fails at once); Stack.Run runs until its context is done and shuts
// down in order (stop fetching, apply and commit the batch in hand, stop
// the timers, drain HTTP, close Redis). Preflight checks credentials and
// TLS at start: a misconfiguration is an error, an outage is not.
package assembly
