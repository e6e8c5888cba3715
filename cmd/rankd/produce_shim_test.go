package main

import "github.com/rankd/rankd/cmd/rankd/internal/produce"

// The producer's old names in this package, for workload_test.go (TestPace,
// a copy of internal/produce's TestPace) and drain_test.go, which are being
// replaced elsewhere (internal/workload, rankd bench): delete this file
// with them.
var (
	pace       = produce.Pace
	fileSource = produce.FileSource
	newWriter  = produce.NewWriter
	writeErr   = produce.WriteError
)

type paceOptions = produce.Options

const paceChunk = produce.Chunk
