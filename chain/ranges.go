package chain

// rangeSizer sizes eth_getLogs ranges, for live ingestion and replays
// alike: ranges start at initialRange blocks (or the network's
// MaxBlockRange if smaller), halve when the node refuses a range (see
// IsRangeError), and aim at maxLogs logs each, so a dense stretch is read
// in small pieces and a sparse one in large ones. What one range yields is
// therefore bounded (by maxLogs, or one block's logs), whatever the span.
type rangeSizer struct {
	size    uint64
	max     uint64 // the network's MaxBlockRange
	maxLogs int
}

func newRangeSizer(maxRange uint64, maxLogs int) rangeSizer {
	return rangeSizer{max: maxRange, maxLogs: maxLogs}
}

// next is the size of the next range.
func (r *rangeSizer) next() uint64 {
	if r.size == 0 {
		// Start at one block and double while ranges are sparse: a dense
		// start is then read in pieces, not one huge range.
		r.size = min(r.max, initialRange)
	}
	return r.size
}

// shrink halves the size after the node refused from..to; false when the
// range is one block already (the error is then the node's last word).
func (r *rangeSizer) shrink(from, to int64) bool {
	if r.next() <= 1 {
		return false
	}
	r.size = max(1, min(r.size, uint64(to-from+1))/2)
	return true
}

// fit adapts the size to the logs the last range held.
func (r *rangeSizer) fit(logs int) {
	switch {
	case logs > r.maxLogs && r.size > 1:
		r.size = max(1, r.size/2)
	case logs < r.maxLogs/4 && r.size < r.max:
		r.size = min(r.max, r.size*2)
	}
}
