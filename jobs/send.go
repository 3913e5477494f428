package jobs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// externalID is a send attempt's idempotency key for the relayer. It is
// known before the relayer sees anything, because the step's row and
// attempt were journaled when the step's job was enqueued.
func externalID(run uuid.UUID, stepKey string, attempt int) string {
	return fmt.Sprintf("rflow:%s:%s:%d", run, stepKey, attempt)
}

func parseExternalID(id string) (uuid.UUID, string, int, bool) {
	rest, ok := strings.CutPrefix(id, "rflow:")
	if !ok {
		return uuid.Nil, "", 0, false
	}
	i, j := strings.IndexByte(rest, ':'), strings.LastIndexByte(rest, ':')
	if i < 0 || j <= i {
		return uuid.Nil, "", 0, false
	}
	run, err := uuid.Parse(rest[:i])
	attempt, err2 := strconv.Atoi(rest[j+1:])
	if err != nil || err2 != nil {
		return uuid.Nil, "", 0, false
	}
	return run, rest[i+1 : j], attempt, true
}
