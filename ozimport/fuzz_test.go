package ozimport

import (
	"testing"
)

// FuzzTranslateExpression feeds Monitor expressions to the translator:
// it never panics, and whatever it translates compiles as an rflow where:
// (so an imported project never fails validate on a condition) and
// evaluates without panicking. Seeds: testdata/fuzz/FuzzTranslateExpression.
func FuzzTranslateExpression(f *testing.F) {
	for _, s := range []string{
		"amount > 1000",
		"who == '0x70997970c51812dc3a010c7d01b50e0d17dc79c8' OR memo contains 'x'",
		"(amount < 10 OR ok == true) AND info.label == main",
		"ids[1] >= 0x10 AND 9 != 3",
	} {
		f.Add(s)
	}
	p := testProbe(f)
	f.Fuzz(func(t *testing.T, src string) {
		out, err := TranslateExpression(src, p.event)
		if err != nil {
			return
		}
		w, err := p.compile(out)
		if err != nil {
			t.Fatalf("%q translated to %q, which rflow rejects: %v", src, out, err)
		}
		_, _ = w.Trigger.Event.Where.Bool(probeEvent())
	})
}
