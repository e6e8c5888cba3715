package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisLogger routes go-redis's internal log lines (connection pool
// errors and the like, plain text on stderr by default) through slog, at
// warn level, so that they are structured records of rankd's logs (issue
// 11). It implements go-redis's internal.Logging.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	msg = strings.TrimPrefix(msg, "redis: ")
	l.log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("component", "go-redis"))
}

// setRedisLogger makes log the logger of go-redis (a process-wide setting).
func setRedisLogger(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}
