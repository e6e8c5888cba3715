//go:build nodev

package main

import (
	"context"
	"io"
)

// benchCommand in a build without dev tooling (-tags nodev, the image):
// not listed (no summary), and explaining itself when asked for.
var benchCommand = command{"bench", "", func(context.Context, []string, io.Writer, io.Writer) error {
	return usagef("not in this build: rankd was built with -tags nodev, without the Kafka broker the benchmark starts; " +
		"a default build has it (go run ./cmd/rankd bench in a checkout)")
}}
