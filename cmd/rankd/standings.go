package main

import (
	"context"

	"github.com/rankd/rankd/cmd/rankd/internal/secure"
	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking/store"
)

// runStandings seals and publishes the final periods of the boards with a
// publish section (store.RunStandings) until ctx is done; without such
// boards it only waits.
func (s *stack) runStandings(ctx context.Context) error {
	sc := s.cfg.Standings
	if len(sc.Boards) == 0 {
		<-ctx.Done()
		return nil
	}
	w := consumer.NewStandingsWriter(s.cfg.Kafka.Brokers, secure.KafkaDialer(s.cfg.Kafka), sc.Topic)
	defer w.Close()
	return store.RunStandings(ctx, s.store, store.StandingsSchedule{
		Boards: sc.Boards, Publisher: w, Interval: sc.Interval, LockTTL: sc.LockTTL,
		Registerer: s.reg, Logger: s.log})
}
