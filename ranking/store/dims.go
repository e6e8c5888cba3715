package store

import (
	"context"
	"fmt"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// The dims registry: per board and generation, the set
// <prefix>:dims:<board> of the tags (board+dims) that have data. Apply adds
// a tag the first time a process writes it, and again every reregister
// (so a tag that PruneDims removed while it was written again comes back);
// PruneDims removes the tags whose streams expired, so the set does not
// grow for ever.

// reregister is how often a process registers a dims tag it keeps writing.
const reregister = time.Minute

// PruneDims removes from board's dims registry the tags whose stream has
// expired: no meta key any more (it lives 2 retentions plus a period after
// the stream's last write, longer than any of its periods). Total boards
// never expire and are left alone. It scans in chunks of 500 tags, one
// pipeline of EXISTS and one SREM per chunk. The store New returns
// prunes the active generation and the one being built. It returns the
// number of tags removed.
func (s *Store) PruneDims(ctx context.Context, board string) (int, error) {
	st, err := s.board(board)
	if err != nil || st.b.Window == ranking.WindowTotal {
		return 0, err
	}
	if s.root == nil {
		g, err := s.cachedGen(ctx, board)
		if err != nil {
			return 0, err
		}
		n, err := s.view(g.Active).pruneDims(ctx, board)
		if err != nil || g.Building < 0 {
			return n, err
		}
		m, err := s.view(g.Building).pruneDims(ctx, board)
		return n + m, err
	}
	return s.pruneDims(ctx, board)
}

func (s *Store) pruneDims(ctx context.Context, board string) (int, error) {
	key := s.dimsKey(board)
	removed := 0
	var cursor uint64
	for {
		tags, next, err := s.rdb.SScan(ctx, key, cursor, "", 500).Result()
		if err != nil {
			return removed, fmt.Errorf("listing dims of %q: %w", board, err)
		}
		if len(tags) > 0 {
			pipe := s.rdb.Pipeline()
			cmds := make([]*redis.IntCmd, len(tags))
			for i, tag := range tags {
				// a stream lives while its meta (rolling boards) or its
				// event counts (every board) do: both expire metaTTL after
				// the stream's last write
				cmds[i] = pipe.Exists(ctx, s.metaKey(tag), Key(s.prefix, tag, KindCount, ""))
			}
			_, _ = pipe.Exec(ctx)
			var gone []any
			for i, c := range cmds {
				n, err := c.Result()
				if err != nil {
					return removed, fmt.Errorf("checking dims of %q: %w", board, err)
				}
				if n == 0 {
					gone = append(gone, tags[i])
				}
			}
			if len(gone) > 0 {
				if err := s.rdb.SRem(ctx, key, gone...).Err(); err != nil {
					return removed, fmt.Errorf("pruning dims of %q: %w", board, err)
				}
				removed += len(gone)
			}
		}
		if cursor = next; cursor == 0 {
			return removed, nil
		}
	}
}
