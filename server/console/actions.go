package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/store"
)

// retry sends POST /v1/runs/{id}/retry through the command API, with the
// Idempotency-Key rendered into the form: a double submit replays the
// first answer instead of retrying twice, and the API's checks (only a
// failed run, a reused key with another request) apply as they are.
func (c *Console) retry(w http.ResponseWriter, r *http.Request, sess *session) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "That is not a run id."})
		return
	}
	key, ok := c.formKey(w, r, sess)
	if !ok {
		return
	}
	c.viaAPI(w, r, sess, apiCall{Path: "/v1/runs/" + id.String() + "/retry", Key: key,
		Back: Prefix + "runs/" + id.String(), Refused: "The retry was refused."})
}

// decide approves or rejects an approval through the command API
// (POST /v1/approvals/{id}/approve|reject), recorded as decided by the
// session's token with the form's reason. The form's key makes a double submit
// one decision; the API's checks (a conflicting or late decision: 409)
// apply as they are.
func (c *Console) decide(verb string) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		id, err := uuid.Parse(r.PathValue("id"))
		if err != nil {
			c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "That is not an approval id."})
			return
		}
		ap, err := store.GetApproval(r.Context(), c.cfg.Pool, id, false)
		if errors.Is(err, store.ErrNotFound) {
			c.render(w, r, http.StatusNotFound, "error", sess, view{"Message": "There is no approval " + id.String() + "."})
			return
		}
		if err != nil {
			c.fail(w, r, sess, err)
			return
		}
		body, err := json.Marshal(map[string]string{"reason": r.PostFormValue("reason")})
		if err != nil {
			c.fail(w, r, sess, err)
			return
		}
		key, ok := c.formKey(w, r, sess)
		if !ok {
			return
		}
		c.viaAPI(w, r, sess, apiCall{Path: "/v1/approvals/" + id.String() + "/" + verb, Key: key, Body: body,
			Back: Prefix + "runs/" + ap.RunID.String(), Refused: "The decision was refused."})
	}
}

// formKey is the command key rendered into a button's form (a UUID).
func (c *Console) formKey(w http.ResponseWriter, r *http.Request, sess *session) (string, bool) {
	key, err := uuid.Parse(r.PostFormValue("key"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "The form has no command key: reload the page."})
		return "", false
	}
	return key.String(), true
}

// apiCall is one command a console form sends through the command API.
type apiCall struct {
	Path string
	// Key is the command's Idempotency-Key, from the form.
	Key  string
	Body []byte
	// Back is where the browser goes after success (unless Landing says
	// otherwise) and where a refusal's page links back to.
	Back string
	// Refused is the message of a refusal the API did not explain.
	Refused string
	// Landing, when set, picks the page to go to from the API's answer.
	Landing func(resp []byte) string
}

// viaAPI sends a console form's command to the command API's own handler,
// as the session's principal (so the API's roles apply as they are) and
// with the form's Idempotency-Key, and goes to the call's landing page on
// success; a refusal is shown with the API's message.
func (c *Console) viaAPI(w http.ResponseWriter, r *http.Request, sess *session, call apiCall) {
	var rd io.Reader = http.NoBody
	if call.Body != nil {
		rd = bytes.NewReader(call.Body)
	}
	req, err := http.NewRequestWithContext(access.WithPrincipal(r.Context(), sess.principal), http.MethodPost, call.Path, rd)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	req.Header.Set("Idempotency-Key", call.Key)
	if call.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.RemoteAddr = r.RemoteAddr
	res := &recorder{header: http.Header{}}
	c.cfg.Commands.ServeHTTP(res, req)
	if res.status >= 200 && res.status < 300 {
		next := call.Back
		if call.Landing != nil {
			next = call.Landing(res.body.Bytes())
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	var answer struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := call.Refused
	if json.Unmarshal(res.body.Bytes(), &answer) == nil && answer.Error.Message != "" {
		msg = answer.Error.Message
	}
	c.render(w, r, res.status, "error", sess, view{"Message": msg, "Back": call.Back})
}

// cancel sends POST /v1/runs/{id}/cancel through the command API with the
// form's reason, as retry does: the API checks the reason (at most
// store.MaxReasonLen characters) and the run's state (409 for a finished
// run), and the form's key makes a double submit one cancellation.
func (c *Console) cancel(w http.ResponseWriter, r *http.Request, sess *session) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "That is not a run id."})
		return
	}
	c.reasoned(w, r, sess, "/v1/runs/"+id.String()+"/cancel", Prefix+"runs/"+id.String(), "The cancellation was refused.")
}

// pause and resume send POST /v1/workflows/{name}/pause|resume through the
// command API, what `rflow workflows pause [--reason]` and `resume` do; a
// pause keeps the form's reason (paused_reason).
func (c *Console) pause(w http.ResponseWriter, r *http.Request, sess *session) {
	c.reasoned(w, r, sess, "/v1/workflows/"+url.PathEscape(r.PathValue("name"))+"/pause", Prefix+"workflows", "The pause was refused.")
}

func (c *Console) resume(w http.ResponseWriter, r *http.Request, sess *session) {
	key, ok := c.formKey(w, r, sess)
	if !ok {
		return
	}
	c.viaAPI(w, r, sess, apiCall{Path: "/v1/workflows/" + url.PathEscape(r.PathValue("name")) + "/resume", Key: key,
		Back: Prefix + "workflows", Refused: "The resume was refused."})
}

// reasoned sends a command whose body is the form's reason ({"reason": …},
// or no body when the field is empty) under the form's key.
func (c *Console) reasoned(w http.ResponseWriter, r *http.Request, sess *session, path, back, refused string) {
	key, ok := c.formKey(w, r, sess)
	if !ok {
		return
	}
	var body []byte
	if reason := r.PostFormValue("reason"); reason != "" {
		var err error
		if body, err = json.Marshal(map[string]string{"reason": reason}); err != nil {
			c.fail(w, r, sess, err)
			return
		}
	}
	c.viaAPI(w, r, sess, apiCall{Path: path, Key: key, Body: body, Back: back, Refused: refused})
}

// recorder captures the command API's answer to an in-process request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
