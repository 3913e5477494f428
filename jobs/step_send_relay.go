package jobs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/store"
)

// externalID is a send attempt's idempotency key for the relayer. It is
// known before the relayer sees anything, because the step's row and
// attempt were journaled when the step's job was enqueued.
func externalID(run uuid.UUID, stepKey string, attempt int) string {
	return fmt.Sprintf("rflow:%s:%s:%d", run, stepKey, attempt)
}

// reorgExternalID is the key of a compensation send: an on_reorg step of
// the response to run's orphaning at fork.
func reorgExternalID(run uuid.UUID, fork int64, stepKey string, attempt int) string {
	return fmt.Sprintf("rflow-reorg:%s:%d:%s:%d", run, fork, stepKey, attempt)
}

// sendRef is what a send's external id names: a step attempt of a run, or
// of the response to a run's orphaning at a fork.
type sendRef struct {
	journal store.Journal
	run     uuid.UUID
	fork    int64 // ReorgJournal only
	key     string
	attempt int
}

func parseExternalID(id string) (sendRef, bool) {
	ref := sendRef{journal: store.RunJournal}
	rest, ok := strings.CutPrefix(id, "rflow:")
	if !ok {
		if rest, ok = strings.CutPrefix(id, "rflow-reorg:"); !ok {
			return sendRef{}, false
		}
		ref.journal = store.ReorgJournal
	}
	i, j := strings.IndexByte(rest, ':'), strings.LastIndexByte(rest, ':')
	if i < 0 || j <= i {
		return sendRef{}, false
	}
	run, err := uuid.Parse(rest[:i])
	attempt, err2 := strconv.Atoi(rest[j+1:])
	if err != nil || err2 != nil {
		return sendRef{}, false
	}
	ref.run, ref.attempt, ref.key = run, attempt, rest[i+1:j]
	if ref.journal == store.ReorgJournal {
		fork, key, ok := strings.Cut(ref.key, ":")
		if !ok {
			return sendRef{}, false
		}
		if ref.fork, err = strconv.ParseInt(fork, 10, 64); err != nil {
			return sendRef{}, false
		}
		ref.key = key
	}
	return ref, true
}
