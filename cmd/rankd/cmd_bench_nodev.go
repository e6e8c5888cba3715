//go:build nodev

package main

import "github.com/rankd/rankd/cmd/rankd/internal/cli"

// benchSpec in a build without dev tooling (-tags nodev, the image).
var benchSpec = cli.NotInBuild("bench", "the Kafka broker the benchmark starts")

// child: a build without dev tooling starts no servers of its own.
func child() (int, bool) { return 0, false }
