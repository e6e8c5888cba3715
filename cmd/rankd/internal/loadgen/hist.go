package loadgen

import (
	"math/bits"
	"time"
)

// hist is a histogram of latencies in µs with 32 buckets per power of two
// (within about 3%), up to 2^30 µs.
type hist struct {
	counts [31 << subBits]int64
	n      int64
}

const subBits = 5

func bucket(us uint64) int {
	if us < 1<<subBits {
		return int(us)
	}
	e := bits.Len64(us) - subBits - 1 // us >> e is in [32, 64)
	return min((e+1)<<subBits+int(us>>e)-1<<subBits, len(hist{}.counts)-1)
}

// lower returns the least µs of bucket i.
func lower(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	e := i>>subBits - 1
	return uint64(i&(1<<subBits-1)+1<<subBits) << e
}

func (h *hist) add(d time.Duration) {
	h.counts[bucket(uint64(max(d.Microseconds(), 0)))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q quantile in ms (nearest rank, the bucket's
// middle).
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(q*float64(h.n)+0.999999), 1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := lower(i), lower(i+1)
			return float64(lo+hi) / 2 / 1e3
		}
	}
	return 0
}
