package server

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rflow-dev/rflow/store"
)

// FuzzReadReason: a cancel or pause body, after the checks every command
// body passes (checkJSONBody), is either a 400 naming the problem or a
// reason rflow can store: trimmed, at most store.MaxReasonLen characters,
// UTF-8 without NUL. Seeds in testdata/fuzz/FuzzReadReason.
func FuzzReadReason(f *testing.F) {
	for _, s := range []string{"", "{}", `{"reason": "dup"}`, `{"reason": null}`, `{"reason": 5}`, `{"reasn": "x"}`,
		`{"reason": "a"} {}`, `"x"`, `[]`, `{"reason": "\u00e9 "}`, `{"reason": "` + strings.Repeat("é", 1001) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if aerr := checkJSONBody(body); aerr != nil {
			return
		}
		reason, aerr := readReason(body)
		if aerr != nil {
			if aerr.status != http.StatusBadRequest || aerr.message == "" {
				t.Fatalf("%q: %d %q", body, aerr.status, aerr.message)
			}
			return
		}
		if reason != strings.TrimSpace(reason) || utf8.RuneCountInString(reason) > store.MaxReasonLen ||
			!utf8.ValidString(reason) || strings.ContainsRune(reason, 0) {
			t.Fatalf("%q: reason %q cannot be stored", body, reason)
		}
	})
}
