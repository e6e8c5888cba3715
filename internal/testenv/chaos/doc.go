// Package chaos holds rankd's chaos and overload tests (issue #10): they
// build the rankd binary, run `rankd run` processes against a restartable
// broker process and redis-server processes, inject faults (SIGKILL and
// SIGTERM of instances, broker and Redis restarts, Redis paused with
// SIGSTOP) while a producer keeps sending, and then check every board
// against the oracle recomputed from the Kafka log.
//
// The package has no code of its own outside its tests:
//
//	CI=true go test -race -count=1 -run . -v ./internal/testenv/chaos/
//
// runs the short variants, among them the crash loop (one instance
// SIGKILLed again and again during the rebalances its restarts cause;
// every partition must commit again within rebalance timeout + session
// timeout + 3 s of the last kill); RANKD_CHAOS=long runs the long one
// (minutes, at least 20 SIGKILL cycles, a 25-kill crash loop);
// RANKD_CHAOS=recovery runs only TestRecoveryDefaults, which measures each
// instance fault with rankd's default group timings (docs/recovery.md);
// RANKD_CHAOS_SEED=N replays a run's fault schedule and workload;
// RANKD_KFAKE_DEAD_MEMBERS=1 runs the broker without testenv/kgroup.
package chaos
