// Package consumer is rankd's Kafka transport: group readers, batching,
// delivery to a Sink, dead letters, offset commits, backpressure, graceful
// shutdown, and the loop's metrics and readiness (Ready, NotReady: the
// assembly's /readyz serves them). It knows nothing of boards;
// RankingSink connects it to the rest of the flow: Kafka -> consumer ->
// ranking/ingest (decode, route) -> ranking/store (Store.ApplyFrom).
// `rankd replay` is package consumer/replay.
//
// # Stream time
//
// RankingSink gives every update the stream time of its message's
// partition (the greatest event time of the decodable messages at lower
// offsets), from which the store judges lateness; it keeps each
// partition's stream time in memory between batches and writes it to the
// store as a mark with every applied batch, so that a worker taking a
// partition over resumes with the stream time at the committed offset.
//
// # The loop
//
// A Consumer runs Config.Workers workers; each is one member of the
// consumer group with its own partition readers, so several processes and
// workers share the partitions. Each worker:
//
//	fetch -> batch (BatchCount, BatchBytes or Linger, whichever first)
//	      -> Sink.Apply -> write dead letters -> hand the highest offset
//	         per partition of the batch to its committer
//
// and then takes its next batch, while the committer commits in the
// background: one commit in flight, the offsets handed over meanwhile
// merged per partition (newest wins) into the next. A commit is not on the
// path from fetch to visible: the boards change at the apply, and a
// partition's next reader starts where Redis says it stands. At most one
// batch per worker is in hand, plus the readers' bounded queue
// (QueueCapacity), so a slow Redis slows fetching instead of growing
// memory.
//
// # Guarantees
//
//   - Never commit past an unapplied message: a batch is committed only
//     after Sink.Apply returned nil for all of it and its dead letters were
//     acknowledged by the brokers (acks=all).
//   - At-least-once delivery to the Sink, exactly-once effect on the boards:
//     redelivered messages (after a crash, a retry, a rebalance) are
//     recognized by the store's message-ID dedupe.
//   - A permanently failing message never stops its partition: it is
//     written to the dead-letter topic, with headers reason, topic,
//     partition, offset and error (and boards, for late and out_of_range),
//     and committed with the rest. The
//     dead-letter topic is at least once (a retried write may repeat
//     messages).
//
// # Errors
//
// Transient errors (Redis or the brokers unavailable, timeouts, a failed
// dead-letter write) are retried on the same batch, without fetching more,
// with capped exponential backoff and jitter (Config.RetryMin..RetryMax),
// for as long as it takes; they are logged at the top of the retry loop and
// counted in rankd_consumer_retries_total. Workers never exit on an error.
//
// A commit that keeps failing is different: the committer retries it
// CommitAttempts times (the offsets handed over meanwhile join the retry)
// and then gives it up, while the worker goes on applying. This is
// deliberate. Commit failures happen mostly around
// rebalances, when the batch's partitions may already belong to another
// member, and a worker cannot re-fetch from a kafka-go group reader anyway.
// Giving up is safe: the batch is applied, so a later commit of the same
// partition (which carries a higher offset) covers it, and if none comes
// the partition's next owner redelivers it from the last committed offset,
// where dedupe makes it a no-op. A commit from a member that lost the
// partition can move the group's offset back, never forward past an
// unapplied message; that only causes redelivery.
//
// # Shutdown
//
// When Run's context is done the workers stop fetching, apply, dead-letter
// and commit the batch in hand (and any commit still pending) within
// Config.ShutdownTimeout, close their
// readers (leaving the group, so the partitions move at once), and the
// dead-letter writer is closed. The caller closes Redis after Run returns.
package consumer
