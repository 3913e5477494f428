package ozimport

import (
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzRenderTemplate feeds Monitor message templates to the translator:
// whatever it renders, for chat, webhook or Telegram text, compiles as an
// rflow notify text and renders without panicking, and a template without
// variables renders as itself. Seeds: testdata/fuzz/FuzzRenderTemplate.
func FuzzRenderTemplate(f *testing.F) {
	for _, s := range []string{
		"${monitor.name}: ${events.0.args.amount} in ${transaction.hash}",
		"*bold* [link](https://x.y/${event_0_who}) ${events} ${functions} ${HOME} $ {x} ${{ x }}",
	} {
		f.Add(s)
	}
	p := testProbe(f)
	m := &Monitor{Name: "Fuzz ${{ m }}", File: "monitors/f.json"}
	tr := &Trigger{ID: "t", File: "triggers/t.json"}
	f.Fuzz(func(t *testing.T, tpl string) {
		if len(tpl) > 4096 || !utf8.ValidString(tpl) { // Monitor's JSON files hold UTF-8 text
			return
		}
		tc := &templateContext{b: newBuilder(&Config{}), monitor: m, ev: p.event, sig: "Probe(address,uint256)"}
		msg := Message{Title: "t", Body: tpl}
		for _, text := range []string{tc.render(tpl, m, tr, "message.body"), tc.chat(msg, m, tr), tc.telegram(msg, m, tr)} {
			w, err := p.compileText(text)
			if err != nil {
				t.Fatalf("%q rendered as %q, which rflow rejects: %v", tpl, text, err)
			}
			got, err := w.Steps[0].Notify.Text.String(probeEvent())
			if err == nil && !strings.Contains(tpl, "${") && text == tc.render(tpl, m, tr, "message.body") && got != tpl {
				t.Fatalf("%q without variables rendered as %q", tpl, got)
			}
		}
	})
}
