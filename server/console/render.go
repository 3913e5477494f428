package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// view is the data of one page; render adds the session's fields.
type view map[string]any

// pageNames are the templates under templates/, each rendered inside
// layout.html, with the run table (runtable.html) and the approval card
// (approval.html) that two pages share.
var pageNames = []string{"login", "error", "runs", "run", "dlq", "workflows", "workflow", "approvals"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"short": store.ShortID,
		"ts":    formatTime,
		"dur":   duration,
		"json":  prettyJSON,
		// key is a fresh command key for a form (its Idempotency-Key).
		"key": uuid.NewString,
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/runtable.html", "templates/approval.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes a page. It renders into a buffer first, so a template
// error is a clean 500, never half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, sess *session, v view) {
	if v == nil {
		v = view{}
	}
	v["Page"] = name
	if name == "error" {
		v["Heading"] = errorHeading(status)
	}
	if sess != nil {
		v["CSRF"] = sess.csrf
		v["LoggedIn"] = true
		// Can.<role> decides which buttons a page shows: none the token
		// could not use (the handlers refuse them anyway).
		can := map[string]bool{}
		for _, role := range sess.principal.Roles {
			can[string(role)] = true
		}
		v["Can"] = can
		v["Who"] = sess.principal.Name
		v["WhoRoles"] = sess.principal.RoleList()
		v["RiverUI"] = c.cfg.RiverUI && sess.principal.Has(workflow.RoleRead)
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, v); err != nil {
		c.logger.ErrorContext(r.Context(), "console page failed to render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorHeading heads the error page: what kind of failure it was. A refused
// action (a conflict, an expired decision) is "Not done".
func errorHeading(status int) string {
	switch status {
	case http.StatusNotFound:
		return "Not found"
	case http.StatusBadRequest:
		return "Not understood"
	case http.StatusForbidden:
		return "Not allowed"
	case http.StatusInternalServerError:
		return "Something went wrong"
	}
	return "Not done"
}

// fail logs err and shows a page that names no internals.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	c.logger.ErrorContext(r.Context(), "console request failed", "path", r.URL.Path, "err", err)
	c.render(w, r, http.StatusInternalServerError, "error", sess, view{"Message": "Something went wrong; the details are in rflow's log."})
}

func formatTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05.000")
	case *time.Time:
		if v != nil {
			return v.UTC().Format("2006-01-02 15:04:05.000")
		}
	}
	return ""
}

// duration is finished - started, blank while either is unknown.
func duration(started, finished *time.Time) string {
	if started == nil || finished == nil {
		return ""
	}
	return finished.Sub(*started).Round(time.Millisecond).String()
}

// maxShownJSON caps an output shown on a page; the API has the rest.
const maxShownJSON = 16 << 10

// prettyJSON indents a journaled value and masks anything that looks like
// a credential in it (a step's output is what its endpoint sent back, which
// may echo a URL).
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Reset()
		buf.Write(raw)
	}
	s := redact.Text(buf.String())
	if len(s) > maxShownJSON {
		s = s[:maxShownJSON] + "\n… (truncated; the whole value is in GET /v1/runs/{id})"
	}
	return s
}
