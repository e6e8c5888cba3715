// Command rankd consumes gift, like and comment events from Kafka, keeps exact
// leaderboards in Redis and serves them over HTTP.
//
//	rankd run --config rankd.yaml      consume, apply, serve
//	rankd dev                          everything embedded, for a first look
//	                                   (not in a -tags nodev build: the image)
//	rankd produce --brokers B --rate N load generator
//	rankd rollover --config FILE       prefill rolling boards now
//	rankd replay --config FILE         rebuild boards from the topics, then switch
//	rankd config check FILE            print the resolved boards or the errors
//	rankd healthcheck --url URL        exit 0 when URL answers 2xx
//	rankd version (or --version)       version and VCS revision of the build
//
// Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if code, ok := child(); ok { // a server that rankd bench started (cmd_bench.go)
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second Ctrl-C kills at once
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
