package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxReasonLen bounds, in characters, what an operator says when cancelling
// a run or pausing a workflow (`--reason`, the API's "reason"): a sentence
// for the next person reading runs show, not a document.
const MaxReasonLen = 1000

// CleanReason returns an operator's reason without surrounding space (""
// when nothing was said), or an error naming the limit when it is longer
// than MaxReasonLen characters. The CLI and the API check it the same way.
func CleanReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n > MaxReasonLen {
		return "", fmt.Errorf("the reason is %d characters long; the limit is %d", n, MaxReasonLen)
	}
	return reason, nil
}
