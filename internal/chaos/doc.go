// Package chaos holds rankd's chaos and overload tests (issue #10): they
// build the rankd binary, run `rankd run` processes against a restartable
// broker process and redis-server processes, inject faults (SIGKILL and
// SIGTERM of instances, broker and Redis restarts, Redis paused with
// SIGSTOP) while a producer keeps sending, and then check every board
// against the oracle recomputed from the Kafka log.
//
// The package has no code of its own outside its tests:
//
//	CI=true go test -race -count=1 -run . -v ./internal/chaos/
//
// runs the short variants; RANKD_CHAOS=long runs the long one (minutes,
// at least 20 SIGKILL cycles); RANKD_CHAOS_SEED=N replays a run's fault
// schedule and workload.
package chaos
