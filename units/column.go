package units

import "strings"

// Column aligns formatted amounts of one table column on their decimal
// point: the numbers' whole parts right-aligned, their fractions padded,
// and whatever follows (the symbol, the raw integer) after them, so cap,
// spent and remaining read down a column like a ledger. The cells are not
// padded to one width: a tabwriter does that.
func Column(cells []string) []string {
	type parts struct{ whole, frac, rest string }
	ps := make([]parts, len(cells))
	var wholeW, fracW int
	for i, c := range cells {
		num, rest, _ := strings.Cut(c, " ")
		if rest != "" {
			rest = " " + rest
		}
		whole, frac, ok := strings.Cut(num, ".")
		if ok {
			frac = "." + frac
		}
		ps[i] = parts{whole, frac, rest}
		wholeW, fracW = max(wholeW, len(whole)), max(fracW, len(frac))
	}
	out := make([]string, len(cells))
	for i, p := range ps {
		out[i] = strings.Repeat(" ", wholeW-len(p.whole)) + p.whole + p.frac + strings.Repeat(" ", fracW-len(p.frac)) + p.rest
	}
	return out
}
