package consumer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
)

// metrics are the collectors of the package. Every constructor of the
// package (New, NewRankingSink) registers the whole set on its
// registerer; a collector that is already registered there is reused, so one
// registerer can be given to all of them and they share the series.
type metrics struct {
	// consumer loop
	messages    *prometheus.CounterVec   // topic
	deadLetters *prometheus.CounterVec   // reason
	batchSize   prometheus.Histogram     // messages per batch
	applyDur    prometheus.Histogram     // Sink.Apply duration
	retries     *prometheus.CounterVec   // op: apply, dead_letter, commit, fetch
	commitDrops prometheus.Counter       // commits given up after retries
	commitSkips prometheus.Counter       // batches not committed because the group rebalanced meanwhile
	lag         *prometheus.GaugeVec     // topic, partition
	lagErrors   prometheus.Counter       // failed lag computations
	sinkUpdates *prometheus.CounterVec   // board
	duplicates  prometheus.Counter       // messages
	late        *prometheus.CounterVec   // board
	outOfRange  *prometheus.CounterVec   // board
	eventLag    *prometheus.HistogramVec // topic
	redisErrors prometheus.Counter
	// noticeErrors counts change notices not published (ranking_sink.go)
	noticeErrors prometheus.Counter
	behind       prometheus.Gauge // partitions halted: Redis lost what it knew of them
	rewinds      prometheus.Counter
	rewound      prometheus.Counter   // offsets re-applied after Redis lost them
	rewindDur    prometheus.Histogram // from finding a loss to re-applying it
}

// newMetrics registers the package's collectors on reg (a private registry
// when reg is nil), reusing any that reg already holds.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	var errs []error
	counterVec := func(sub, name, help string, labels ...string) *prometheus.CounterVec {
		return register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: sub, Name: name, Help: help}, labels))
	}
	counter := func(sub, name, help string) prometheus.Counter {
		return register(reg, &errs, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: sub, Name: name, Help: help}))
	}
	seconds := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5ms .. 16s
	m := &metrics{
		messages: counterVec("consumer", "messages_total",
			"Messages fetched from Kafka, per topic.", "topic"),
		deadLetters: counterVec("consumer", "dead_letters_total",
			"Messages written to the dead-letter topic, per reason.", "reason"),
		batchSize: register(reg, &errs, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "rankd", Subsystem: "consumer", Name: "batch_messages",
			Help:    "Messages per applied batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)})),
		applyDur: register(reg, &errs, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "rankd", Subsystem: "consumer", Name: "apply_duration_seconds",
			Help:    "Time to apply one batch of messages: decode, route and write its updates to Redis (each attempt counts, failed ones too).",
			Buckets: seconds})),
		retries: counterVec("consumer", "retries_total",
			"Retries after transient errors, per operation (fetch, apply, dead_letter, commit).", "op"),
		commitSkips: counter("consumer", "commit_skipped_total",
			"Applied batches not committed because the group rebalanced while they were applied (their partitions' next owner redelivers them; dedupe makes that a no-op)."),
		commitDrops: counter("consumer", "commit_dropped_total",
			"Batches whose offset commit was given up after retries (their messages are applied; a later commit or a redelivery covers them)."),
		lag: register(reg, &errs, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "rankd", Subsystem: "consumer", Name: "lag_messages",
			Help: "Messages not yet committed by the group: log end offset minus committed offset, per topic and partition."},
			[]string{"topic", "partition"})),
		lagErrors: counter("consumer", "lag_errors_total",
			"Failed computations of the consumer lag."),

		sinkUpdates: counterVec("sink", "updates_applied_total",
			"Board updates applied to Redis, per board.", "board"),
		duplicates: counter("sink", "duplicates_total",
			"Messages skipped because their message ID had been applied before."),
		late: counterVec("sink", "late_total",
			"Board updates rejected as late (their partition had passed the period end plus the grace), per board; a repeated verdict of a duplicate is not counted.", "board"),
		outOfRange: counterVec("sink", "out_of_range_total",
			"Board updates rejected by the store as out of the board's exact range, per board.", "board"),
		eventLag: register(reg, &errs, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rankd", Subsystem: "sink", Name: "event_lag_seconds",
			Help:    "Event to visible: time the batch was applied minus the event time, per (Kafka) topic.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 18)}, // 5ms .. 22min
			[]string{"topic"})),
		redisErrors: counter("sink", "redis_errors_total",
			"Failed attempts to apply a batch to Redis (Redis unreachable, timing out or refusing; the batch is retried, offsets do not move)."),
		noticeErrors: counter("sink", "change_notice_errors_total",
			"Change notices (the boards that applied batches changed, for the API servers' caches; published off the apply path, each PUBLISH naming every board changed since the previous one) that could not be published; those caches serve the boards' pages until their TTL."),
		behind: register(reg, &errs, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "rankd", Subsystem: "sink", Name: "partitions_behind",
			Help: "Partitions this process does not apply because it cannot apply them exactly (Redis lost everything it knew of them, or Kafka no longer holds the messages to re-apply); they resume after rankd replay."})),
		rewinds: counter("sink", "rewinds_total",
			"Times Redis was found to have lost applied writes of a partition that it still knew the position of; the partition is re-applied from Kafka from there."),
		rewound: counter("sink", "rewound_offsets_total",
			"Offsets re-applied from Kafka because Redis lost their writes."),
		rewindDur: register(reg, &errs, prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "rankd", Subsystem: "sink", Name: "rewind_duration_seconds",
			Help:    "Time from finding that Redis lost applied writes of a partition to having re-applied them.",
			Buckets: seconds})),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Every known label value exists from the start at 0, so that alerts
	// on increase() see the first failure.
	for _, r := range ingest.Reasons() {
		m.deadLetters.WithLabelValues(r)
	}
	for _, op := range []string{"fetch", "apply", "dead_letter", "commit"} {
		m.retries.WithLabelValues(op)
	}
	return m, nil
}

// touchBoards makes the per-board series of boards exist at 0.
func (m *metrics) touchBoards(boards []*ranking.Board) {
	for _, b := range boards {
		m.sinkUpdates.WithLabelValues(b.Name)
		m.late.WithLabelValues(b.Name)
		m.outOfRange.WithLabelValues(b.Name)
	}
}

// register registers c on reg, or returns the equal collector reg already
// holds; other errors are appended to errs.
func register[C prometheus.Collector](reg prometheus.Registerer, errs *[]error, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errs = append(*errs, err)
	}
	return c
}
