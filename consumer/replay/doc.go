// Package replay is `rankd replay`: it rebuilds boards from the Kafka
// topics, beside the consumer's worker loop rather than inside it.
//
// Plan lists what to read (every partition of the topics, from the start
// of the log or a time, to its end, split at the live group's committed
// offsets); Run reads it, one reader per partition, and hands batches to a
// consumer.RankingSink made WithReplay (same decoding, routing and
// verdicts as live consumption); Rebuild is the whole command: the replay
// lock, a new key generation that live instances also write from its
// start, the replay, the rollover of its rolling boards, a comparison with
// the old generation, the atomic switch, the positions raised for
// partitions live consumption halted (store.RaisePositions), and the
// deletion of the old generations. A Rebuild stopped before its switch
// leaves the active generation untouched. DryRun judges without writing.
//
// Its counts are its own: Result.Applied and Duplicates come from the
// sink (consumer.RankingSink.Counts), not from a metrics registry.
// Progress is the command's view of a Rebuild (bars, log lines or
// nothing, as an Observer), WriteSummary its last lines.
package replay
