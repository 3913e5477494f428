package units

import (
	"fmt"
	"math/big"
	"strings"
)

// MaxDecimals is the most decimals a unit may have: 10^77 is the largest
// power of ten below 2^256, so a uint256 amount never needs more.
const MaxDecimals = 77

// maxDigits bounds the text Parse accepts, before it builds an integer
// (a uint256 has 78 digits; the margin allows signed and scaled values).
const maxDigits = 200

// Decimal is v / 10^decimals as exact decimal text with trailing zeros
// trimmed and no grouping: "1.5" for 15·10^17 at 18 decimals, "0" for 0,
// "-0.000001" for -1 at 6. It is what format_units returns in expressions
// and what Parse reads back.
func Decimal(v *big.Int, decimals int) string {
	whole, frac, neg := split(v, decimals)
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// Grouped is Decimal with the whole part in groups of three digits
// ("1,234,567.891"), for people; the fraction is not grouped.
func Grouped(v *big.Int, decimals int) string {
	whole, frac, neg := split(v, decimals)
	out := group(whole)
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// split is |v| / 10^decimals as whole and fraction digits, the fraction
// without trailing zeros. Decimals outside 0..MaxDecimals are clamped:
// display never fails.
func split(v *big.Int, decimals int) (whole, frac string, neg bool) {
	if v == nil {
		return "0", "", false
	}
	decimals = max(0, min(decimals, MaxDecimals))
	digits := new(big.Int).Abs(v).String()
	if len(digits) <= decimals {
		digits = strings.Repeat("0", decimals-len(digits)+1) + digits
	}
	cut := len(digits) - decimals
	return digits[:cut], strings.TrimRight(digits[cut:], "0"), v.Sign() < 0
}

// group puts a comma between each group of three digits, from the right.
func group(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	head := len(digits) % 3
	if head > 0 {
		b.WriteString(digits[:head])
	}
	for i := head; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// Parse reads decimal text ("1.5", "2", "-0.000001", "1_000") as an
// integer scaled by 10^decimals, exactly. More fractional digits than
// decimals is an error, not a rounding; so is anything but digits, one
// point, underscores between them and a leading minus.
func Parse(s string, decimals int) (*big.Int, error) {
	if decimals < 0 || decimals > MaxDecimals {
		return nil, fmt.Errorf("decimals %d out of range 0..%d", decimals, MaxDecimals)
	}
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || !allDigits(whole) || !allDigits(frac) {
		return nil, fmt.Errorf("%q is not a decimal number", s)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > decimals {
		return nil, fmt.Errorf("%q has more than %d decimal places", s, decimals)
	}
	digits := whole + frac + strings.Repeat("0", decimals-len(frac))
	if len(digits) > maxDigits {
		return nil, fmt.Errorf("%q is too large", s)
	}
	r, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal number", s)
	}
	if neg {
		r.Neg(r)
	}
	return r, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
