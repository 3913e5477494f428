package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
)

// fmtAll prints s every way a careless caller might.
func fmtAll(s Secret) string {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s %v %+v %#v %q %x %d", s, s, s, s, s, s, s)
	b, _ := json.Marshal(struct{ K Secret }{s})
	buf.Write(b)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "secret", s)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "secret", s)
	return buf.String()
}
