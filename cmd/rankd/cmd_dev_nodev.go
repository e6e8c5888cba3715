//go:build nodev

package main

import (
	"context"
	"io"
)

// devCommand in a build without dev tooling (-tags nodev, the image): not
// listed (no summary), and explaining itself when asked for.
var devCommand = command{"dev", "", func(context.Context, []string, io.Writer, io.Writer) error {
	return usagef("not in this build: rankd was built with -tags nodev, without the embedded Kafka broker and Redis; " +
		"a default build has it (go run ./cmd/rankd dev in a checkout)")
}}
