package relayer

import (
	"context"
	"slices"
	"sync"

	"golang.org/x/sync/singleflight"
)

// leaders gathers concurrent calls under one key into batches: a call
// that finds no batch of its key running leads one at once (alone, or with
// whatever waits), and calls that come while one runs wait and go in the
// next, led by the first of them. The first broadcasts of a wallet
// (firstSend) and the eth_estimateGas calls of a network (estimateGas) go
// out this way.
type leaders[K comparable, T any] struct {
	mu     sync.Mutex
	queues map[K]*leadQueue[T]
}

// leadQueue is the calls of one key waiting for a batch; busy while one
// runs.
type leadQueue[T any] struct {
	busy    bool
	waiting []*leadCall[T]
}

// leadCall is one call waiting: lead wakes it, true to lead the next
// batch, false when its batch is done.
type leadCall[T any] struct {
	item T
	lead chan bool
}

// join puts item in key's next batch and returns once that batch has run:
// run is called with the batch (at most max items, the leader's own
// first) by the call that leads it. A waiting call waits whatever its
// context: the leader's context bounds the batch.
func (l *leaders[K, T]) join(key K, item T, max int, run func(batch []T)) {
	c := &leadCall[T]{item: item, lead: make(chan bool, 1)}
	l.mu.Lock()
	if l.queues == nil {
		l.queues = map[K]*leadQueue[T]{}
	}
	q := l.queues[key]
	if q == nil {
		q = &leadQueue[T]{}
		l.queues[key] = q
	}
	q.waiting = append(q.waiting, c)
	lead := !q.busy
	q.busy = true
	l.mu.Unlock()
	if lead || <-c.lead {
		l.lead(key, q, max, run)
	}
}

// lead runs q's next batch (it holds the leader's own call: a queue's first
// waiting call is the one woken to lead), then hands the lead to the first
// call still waiting and wakes the batch's others.
func (l *leaders[K, T]) lead(key K, q *leadQueue[T], max int, run func(batch []T)) {
	l.mu.Lock()
	n := min(len(q.waiting), max)
	calls := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if len(q.waiting) > 0 {
			q.waiting[0].lead <- true
		} else {
			q.busy = false
			delete(l.queues, key)
		}
		l.mu.Unlock()
		for _, c := range calls[1:] {
			c.lead <- false
		}
	}()
	batch := make([]T, len(calls))
	for i, c := range calls {
		batch[i] = c.item
	}
	run(batch)
}

// askShared is fn's answer, asked once for every concurrent caller with
// the same key (g, a singleflight group): a burst of sends asks the node
// one question instead of one each. A caller whose ctx ends stops waiting.
func askShared[T any](ctx context.Context, g *singleflight.Group, key string, fn func() (T, error)) (T, error) {
	ask := g.DoChan(key, func() (any, error) { return fn() })
	select {
	case res := <-ask:
		if res.Err != nil {
			var zero T
			return zero, res.Err
		}
		return res.Val.(T), nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
