package testenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// dockerProbeTimeout bounds how long DockerHealthy waits for the engine.
const dockerProbeTimeout = 3 * time.Second

var docker struct {
	once    sync.Once
	healthy bool
}

// DockerHealthy reports whether a Docker engine answers, so that
// testcontainers-go can run containers. It asks the engine itself through
// testcontainers' provider health check (a docker client without an engine
// is not enough), gives up after a few seconds and recovers from the panics
// some testcontainers versions raise when no engine is found. The answer is
// computed once per test binary.
func DockerHealthy() bool {
	docker.once.Do(func() {
		docker.healthy = probeDocker() == nil
	})
	return docker.healthy
}

func probeDocker() error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("docker provider panicked: %v", r)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), dockerProbeTimeout)
		defer cancel()
		provider, err := testcontainers.ProviderDocker.GetProvider()
		if err != nil {
			done <- err
			return
		}
		done <- provider.Health(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(dockerProbeTimeout + time.Second):
		return fmt.Errorf("docker engine did not answer within %v", dockerProbeTimeout)
	}
}
