package assembly

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrLogFormat is NewLogger's error for a format other than json or text.
var ErrLogFormat = errors.New("unknown log format")

// NewLogger returns the logger of a command: records at level and above,
// written to w as JSON (format "json") or text ("text"). It becomes
// go-redis's logger too (SetRedisLogger), so that every command that logs
// has the Redis client's lines among its own records.
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch strings.ToLower(format) {
	case "json":
		log = slog.New(slog.NewJSONHandler(w, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(w, opts))
	default:
		return nil, ErrLogFormat
	}
	SetRedisLogger(log)
	return log, nil
}

// SetRedisLogger makes log the logger of go-redis (a process-wide
// setting): its internal lines (connection pool errors and the like, plain
// text on stderr by default) become records at warn level with
// component=go-redis (issue 11).
func SetRedisLogger(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}

// redisLogger implements go-redis's internal.Logging on slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	msg = strings.TrimPrefix(msg, "redis: ")
	l.log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("component", "go-redis"))
}
