package chain

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// rangeHint is what a provider's eth_getLogs refusal says it accepts.
type rangeHint struct {
	// suggested is the size of the range the provider says will work
	// (Alchemy's "this block range should work: [0x.., 0x..]"); it fits
	// the refused stretch's density, not every stretch.
	suggested uint64
	// limit is the most blocks the provider says a range may span (geth's
	// --rpc.rangelimit, QuickNode's "limited to a 10,000 range").
	limit uint64
	// results is the most logs it says an answer may hold (Infura's
	// "query returned more than 10000 results").
	results uint64
}

var (
	suggestedRange = regexp.MustCompile(`\[\s*(0x[0-9a-f]{1,16})\s*,\s*(0x[0-9a-f]{1,16})\s*\]`)
	statedLimits   = []*regexp.Regexp{
		regexp.MustCompile(`exceed(?:s|ed)? (?:the )?max(?:imum)? block range:? (\d[\d,]*)`), // geth
		regexp.MustCompile(`limited to (?:a )?(\d[\d,]*) (?:block )?range`),                  // QuickNode
		regexp.MustCompile(`up to a (\d[\d,]*)(k?) block range`),                             // Alchemy
		regexp.MustCompile(`block range (?:is )?(?:limited to|too large, max(?:imum)? is) (\d[\d,]*)`),
	}
	resultLimit = regexp.MustCompile(`(?:more than|exceeds?|exceeded|over) (?:the )?(?:limit of )?(\d[\d,]*) (?:results|logs)`)
)

// parseRangeHint reads what a refusal of an eth_getLogs range says the
// provider accepts; the zero hint when it says nothing usable.
func parseRangeHint(msg string) rangeHint {
	msg = strings.ToLower(msg)
	var h rangeHint
	if m := suggestedRange.FindStringSubmatch(msg); m != nil {
		lo, err1 := strconv.ParseUint(m[1][2:], 16, 64)
		hi, err2 := strconv.ParseUint(m[2][2:], 16, 64)
		if err1 == nil && err2 == nil && hi >= lo && hi-lo < hi-lo+1 {
			h.suggested = hi - lo + 1
		}
	}
	for _, re := range statedLimits {
		m := re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		n, ok := count(m[1])
		if ok && len(m) > 2 && m[2] == "k" {
			n, ok = n*1000, n < 1<<50
		}
		if ok && n > 0 {
			h.limit = n
			break
		}
	}
	if m := resultLimit.FindStringSubmatch(msg); m != nil {
		if n, ok := count(m[1]); ok && n > 0 {
			h.results = n
		}
	}
	return h
}

// count parses a decimal with optional thousands commas ("10,000").
func count(s string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n, err == nil
}

// errNodeBehind is a Logs answer from a node without the range's last
// block.
var errNodeBehind = errors.New("the node does not have the block yet")

// lagging reports whether a refusal means the node is behind the range
// asked for (geth: "block range extends beyond current head block"), a
// node that will have the blocks soon: the range is not too large.
func lagging(err error) bool {
	if errors.Is(err, errNodeBehind) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "beyond current head") || strings.Contains(msg, "after last accepted block") ||
		strings.Contains(msg, "block not found") || strings.Contains(msg, "unknown block")
}
