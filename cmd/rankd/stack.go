package main

import (
	"fmt"
	"io"

	"github.com/rankd/rankd/config"
)

// loadConfig loads the config file; its errors, one per line with
// file:line:column, go to stderr and make a usage error (exit 2).
func loadConfig(path string, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, &usageError{}
	}
	return cfg, nil
}
