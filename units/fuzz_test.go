package units_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/rflow-dev/rflow/units"
)

// FuzzDecimal checks, for any integer and decimals, that the text reads
// back as the same integer, that grouping only adds commas, and that
// Format always carries the raw integer. Seeds are in testdata/fuzz.
func FuzzDecimal(f *testing.F) {
	f.Add([]byte{0}, false, 18)
	f.Add([]byte{1}, false, 18)
	f.Add([]byte{0x67, 0xbd, 0x5e, 0x44, 0xa4, 0xc0, 0x00}, false, 18)
	f.Add([]byte{0xff, 0xff, 0xff}, true, 6)
	f.Fuzz(func(t *testing.T, mag []byte, neg bool, decimals int) {
		if len(mag) > 40 {
			mag = mag[:40]
		}
		d := ((decimals % (units.MaxDecimals + 1)) + units.MaxDecimals + 1) % (units.MaxDecimals + 1)
		v := new(big.Int).SetBytes(mag)
		if neg {
			v.Neg(v)
		}
		text := units.Decimal(v, d)
		back, err := units.Parse(text, d)
		if err != nil {
			t.Fatalf("Parse(%q, %d): %v", text, d, err)
		}
		if back.Cmp(v) != 0 {
			t.Fatalf("Parse(Decimal(%s, %d)) = %s", v, d, back)
		}
		if strings.HasSuffix(text, "0") && strings.Contains(text, ".") {
			t.Fatalf("Decimal(%s, %d) = %q keeps a trailing zero", v, d, text)
		}
		if g := units.Grouped(v, d); strings.ReplaceAll(g, ",", "") != text {
			t.Fatalf("Grouped(%s, %d) = %q, not %q with commas", v, d, g, text)
		}
		if s := units.Token("T", d).Format(v); v.Sign() != 0 && !strings.Contains(s, v.String()) && len(v.String()) > 3 {
			t.Fatalf("Format(%s) = %q lacks the raw integer", v, s)
		}
	})
}

// FuzzParse feeds Parse arbitrary text: it never panics, and whatever it
// accepts prints back to text it reads as the same integer.
func FuzzParse(f *testing.F) {
	f.Add("1.5", 18)
	f.Add("-0.000001", 6)
	f.Add("1_000.000", 3)
	f.Add("1e18", 18)
	f.Fuzz(func(t *testing.T, s string, decimals int) {
		v, err := units.Parse(s, decimals)
		if err != nil {
			return
		}
		back, err := units.Parse(units.Decimal(v, decimals), decimals)
		if err != nil || back.Cmp(v) != 0 {
			t.Fatalf("Parse(%q, %d) = %s, which does not print back: %v", s, decimals, v, err)
		}
	})
}
