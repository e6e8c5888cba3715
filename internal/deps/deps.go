package deps
import (
 _ "github.com/segmentio/kafka-go"
 _ "github.com/redis/go-redis/v9"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/testcontainers/testcontainers-go"
 _ "github.com/twmb/franz-go/pkg/kfake"
 _ "github.com/expr-lang/expr"
 _ "gopkg.in/yaml.v3"
 _ "github.com/alicebob/miniredis/v2"
 _ "golang.org/x/sync/errgroup"
 _ "github.com/schollz/progressbar/v3"
)
