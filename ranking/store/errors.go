package store

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/redis/go-redis/v9"
)

// IsUnavailable reports whether err means that Redis could not answer now,
// so that the same call may succeed later: network errors and timeouts, a
// closed or exhausted pool, a server still loading, a cluster that is
// down, a busy script, and ErrRolloverBusy. Callers classify store errors
// with it instead of knowing the client library.
func IsUnavailable(err error) bool {
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, ErrRolloverBusy):
		return true
	}
	for _, p := range []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// IsAuthFailure reports whether err is Redis refusing rankd's credentials
// or its ACL refusing a command or key: NOAUTH, WRONGPASS, NOPERM. Such a
// failure lasts until the configuration (or Redis') changes.
func IsAuthFailure(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range []string{"NOAUTH", "WRONGPASS", "NOPERM"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
