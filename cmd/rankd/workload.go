package main

import wl "github.com/rankd/rankd/internal/workload"

// The standard workload's generator lives in internal/workload (shared with
// `rankd bench`); these names keep this package's code as it was.

type workloadConfig = wl.Config

type wevent = wl.Event

// workload is a workload generator with this package's lowercase next.
type workload struct{ *wl.Generator }

func (w *workload) next() wevent { return w.Next() }

func newWorkload(cfg workloadConfig) (*workload, error) {
	g, err := wl.New(cfg)
	if err != nil {
		return nil, err
	}
	return &workload{g}, nil
}
