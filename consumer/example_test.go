package consumer_test

import (
	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/consumer"
)

// The tests of package consumer run on the example config, which only this
// external test package can load (see consumer.LoadExample).
func init() {
	consumer.LoadExample = func() (consumer.ExampleConfig, error) {
		c, err := config.LoadBytes("example.yaml", config.Example())
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
