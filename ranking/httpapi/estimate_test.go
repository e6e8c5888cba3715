package httpapi_test

import (
	"testing"

	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// TestEstimatesCover: for every kind of read, the estimate charged up
// front counts at least the round trips and commands the read sends, at
// least its dense steps, and at least its reply elements (the fixture's
// pages are shorter than the estimates' full pages): estimated up front,
// corrected by what it really cost, the correction gives back.
func TestEstimatesCover(t *testing.T) {
	srv, _ := fixture(t, httpapi.WithExpensiveRate(0))
	var est, got []store.Counts
	httpapi.SetCostObserver(srv.Config.Handler, func(_ string, e, c store.Counts) {
		est, got = append(est, e), append(got, c)
	})
	for _, u := range []string{
		"/v1/boards/tot/top?limit=20", "/v1/boards/day/top", "/v1/boards/day/top?trend=1",
		"/v1/boards/day/top?trend=1&rank=dense", "/v1/boards/day/top?trend=1&rank=competition",
		"/v1/boards/zone/top?dims=zone:3,room:7", "/v1/boards/r3/top", "/v1/boards/kt/top", "/v1/boards/day/top?percent=50",
		"/v1/boards/day/members/a", "/v1/boards/day/members/c", "/v1/boards/day/members/c?rank=dense",
		"/v1/boards/day/members/c?rank=competition", "/v1/boards/tot/members/m2", "/v1/boards/zone/members/x?dims=zone:3,room:7",
		"/v1/boards/day/members/c/around", "/v1/boards/day/members/c/around?rank=competition",
		"/v1/boards/day/members/c/around?rank=dense", "/v1/boards/day/members/c/around?trend=1&rank=dense",
		"/v1/boards/day/dims", "/v1/boards/zone/dims",
	} {
		est, got = nil, nil
		if code, _, body := rawGet(t, srv.URL+u); code != 200 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
		if len(got) != 1 {
			t.Fatalf("GET %s: %d reads observed, want 1", u, len(got))
		}
		e, c := est[0], got[0]
		if c.RoundTrips > e.RoundTrips || c.Commands > e.Commands || c.Elements > e.Elements || c.DenseSteps > e.DenseSteps {
			t.Errorf("GET %s: estimated %+v, sent %+v", u, e, c)
		}
	}
}
