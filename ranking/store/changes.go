package store

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Change notices. A live consumer, once a batch is applied, publishes the
// names of the boards it changed on one Redis channel (PublishChanges);
// every API server subscribed to it (WatchChanges) reads those boards again
// instead of serving its cached pages until their TTL. A notice is a hint,
// never the source of truth: one lost (a subscriber reconnecting, a
// PUBLISH failing) costs at most the cache's TTL of staleness, and a
// subscriber that (re)subscribes treats every board as changed, since it
// cannot know what it missed.
//
// The channel is <prefix>:changes (the configured prefix, shared by every
// generation); a message is the board names separated by newlines, or
// ChangedAll for every board (a replay's switch of generation).

// ChangedAll is the notice that every board changed.
const ChangedAll = "*"

// ChangesChannel is the Redis channel of the change notices.
func (s *Store) ChangesChannel() string { return s.base + ":changes" }

// PublishChanges tells the API servers that boards changed (nil or empty:
// every board). It is one PUBLISH.
func (s *Store) PublishChanges(ctx context.Context, boards []string) error {
	msg := ChangedAll
	if len(boards) > 0 {
		msg = strings.Join(boards, "\n")
	}
	return s.rdb.Publish(ctx, s.ChangesChannel(), msg).Err()
}

// WatchChanges subscribes to the change notices and calls changed with
// the boards of each (nil: every board), until ctx is done. It calls
// changed(nil) each time the subscription is made, the first time and
// after every reconnection (go-redis reconnects by itself), because the
// notices sent meanwhile are lost. A notice of every board (a replay's
// switch, or a (re)subscription) also drops the generations this store
// read, so that its next reads follow the switch at once instead of
// within genRefresh. changed must not block.
func (s *Store) WatchChanges(ctx context.Context, changed func(boards []string)) error {
	ps := s.rdb.Subscribe(ctx, s.ChangesChannel())
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					s.forgetGens()
					changed(nil)
				}
			case *redis.Message:
				if m.Payload == ChangedAll {
					s.forgetGens() // a replay switched: read the generations again
					changed(nil)
				} else {
					changed(strings.Split(m.Payload, "\n"))
				}
			}
		}
	}
}
