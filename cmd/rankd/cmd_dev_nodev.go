//go:build nodev

package main

import "github.com/rankd/rankd/cmd/rankd/internal/cli"

// devSpec in a build without dev tooling (-tags nodev, the image).
var devSpec = cli.NotInBuild("dev", "the embedded Kafka broker and Redis")
