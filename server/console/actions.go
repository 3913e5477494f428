package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
	key, err := uuid.Parse(r.PostFormValue("key"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "The form has no command key: reload the page."})
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/runs/"+id.String()+"/retry", http.NoBody)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Idempotency-Key", key.String())
	req.RemoteAddr = r.RemoteAddr
	res := &recorder{header: http.Header{}}
	c.cfg.Commands.ServeHTTP(res, req)
	if res.status == http.StatusOK {
		http.Redirect(w, r, Prefix+"runs/"+id.String(), http.StatusSeeOther)
		return
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := "The retry was refused."
	if json.Unmarshal(res.body.Bytes(), &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	c.render(w, r, res.status, "error", sess, view{"Message": msg, "Back": Prefix + "runs/" + id.String()})
}

// pause and resume do what `rflow workflows pause/resume` do. Both are
// idempotent by nature (a flag; resuming starts only runs still waiting),
// so a double submit changes nothing twice.
func (c *Console) pause(w http.ResponseWriter, r *http.Request, sess *session) {
	c.setPaused(w, r, sess, func(name string) error {
		return store.SetWorkflowPaused(r.Context(), c.cfg.Pool, name, true)
	})
}

func (c *Console) resume(w http.ResponseWriter, r *http.Request, sess *session) {
	c.setPaused(w, r, sess, func(name string) error {
		return pgx.BeginFunc(r.Context(), c.cfg.Pool, func(tx pgx.Tx) error {
			_, err := c.cfg.Engine.ResumeWorkflowTx(r.Context(), tx, name)
			return err
		})
	})
}

func (c *Console) setPaused(w http.ResponseWriter, r *http.Request, sess *session, act func(name string) error) {
	name := r.PathValue("name")
	err := act(name)
	if errors.Is(err, store.ErrNotFound) {
		c.render(w, r, http.StatusNotFound, "error", sess, view{"Message": "There is no workflow " + name + "."})
		return
	}
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	http.Redirect(w, r, Prefix+"workflows", http.StatusSeeOther)
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
