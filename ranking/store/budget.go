package store

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrTooExpensive is returned by a read that would need more Redis work
// than its budget allows (see WithDenseBudget): today, dense ranks in a
// previous period (trend) that lie beyond the distinct values the request
// may walk.
var ErrTooExpensive = errors.New("too expensive")

// denseBudget is the number of dense-walk steps left to the reads made
// with one context.
type denseBudget struct{ left atomic.Int64 }

type denseBudgetKey struct{}

// WithDenseBudget returns a context whose reads (Top, Around, Member, Ranks)
// share a budget of steps distinct values visited by dense-rank walks, in
// total. Each step is one O(log n) range look-up inside one script call, so
// the budget bounds the Redis time a request spends on dense ranks, whatever
// its parameters. A walk for a rank in the period read (Around's first
// entry, Member's rank) takes at most half of what is left, so that the
// previous period's ranks that follow still have the other half; such a
// rank beyond its walk is a lower bound (RankApprox). A previous-period rank
// (MemberInfo.PrevRank, Ranks) may use all that is left, and beyond it is
// ErrTooExpensive. Without a budget each walk stops after DenseWalkCap
// distinct values.
func WithDenseBudget(ctx context.Context, steps int) context.Context {
	b := &denseBudget{}
	b.left.Store(int64(max(steps, 0)))
	return context.WithValue(ctx, denseBudgetKey{}, b)
}

// DenseWalkCap bounds the distinct values one dense-rank walk visits when
// the context carries no budget (WithDenseBudget).
const DenseWalkCap = denseWalkCap

// walkCap returns the steps a dense walk of ctx may take now: all that is
// left of the budget for a strict walk (previous-period ranks), half of it
// otherwise.
func walkCap(ctx context.Context, strict bool) (int64, *denseBudget) {
	b, _ := ctx.Value(denseBudgetKey{}).(*denseBudget)
	if b == nil {
		return denseWalkCap, nil
	}
	left := max(b.left.Load(), 0)
	if !strict {
		left /= 2
	}
	return left, b
}

// spend takes the steps a walk took from its budget, if any.
func (b *denseBudget) spend(steps int64) {
	if b != nil {
		b.left.Add(-steps)
	}
}
