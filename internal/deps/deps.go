// Package deps pins modules that rankd is about to use so that go.mod keeps them; it is removed once code imports them.
package deps

import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/expr-lang/expr"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/testcontainers/testcontainers-go"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "golang.org/x/sync/errgroup"
	_ "gopkg.in/yaml.v3"
)
