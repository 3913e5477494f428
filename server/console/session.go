package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// SessionCookie is the name of the console's session cookie. It holds an
// opaque random id; the session (and its CSRF token) lives in this
// process's memory, so a restart logs everyone out.
const SessionCookie = "rflow_session"

// session is one logged-in browser.
type session struct {
	id      string
	csrf    string
	expires time.Time
}

// sessions is the in-memory session table.
type sessions struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, m: map[string]*session{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create() *session {
	sess := &session{id: randomToken(), csrf: randomToken(), expires: time.Now().Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for id, old := range s.m {
		if now.After(old.expires) {
			delete(s.m, id)
		}
	}
	s.m[sess.id] = sess
	return sess
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[id]
	if sess == nil {
		return nil
	}
	if time.Now().After(sess.expires) {
		delete(s.m, id)
		return nil
	}
	return sess
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// sessionOf returns the request's live session, or nil.
func (c *Console) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// Authenticated reports whether r carries a live console session: the
// browser's credential for pages mounted next to the console (River UI).
func (c *Console) Authenticated(r *http.Request) bool { return c.sessionOf(r) != nil }

// tokenOK compares a presented token with the API token in constant time
// (over digests, so the length leaks nothing either).
func (c *Console) tokenOK(presented string) bool {
	if c.cfg.Token == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(c.cfg.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Token == "" {
		c.disabled(w, r)
		return
	}
	c.render(w, r, http.StatusOK, "login", nil, view{"Next": localNext(r.URL.Query().Get("next"))})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Token == "" {
		c.disabled(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := localNext(r.PostFormValue("next"))
	if !c.tokenOK(strings.TrimSpace(r.PostFormValue("token"))) {
		c.logger.WarnContext(r.Context(), "console login refused: wrong token", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusUnauthorized, "login", nil, view{"Next": next, "Error": "That is not the API token."})
		return
	}
	sess := c.sessions.create()
	c.setCookie(w, r, sess.id, int(c.cfg.SessionTTL/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	c.sessions.drop(sess.id)
	c.setCookie(w, r, "", -1)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// localNext keeps a post-login redirect inside the console.
func localNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, Prefix) ||
		strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return Prefix
	}
	return u.RequestURI()
}

func (c *Console) disabled(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusServiceUnavailable, "error", nil,
		view{"Message": "The console is disabled: start rflow with RFLOW_API_TOKEN set to enable it."})
}

// pageHandler is a console page for a logged-in browser.
type pageHandler func(w http.ResponseWriter, r *http.Request, sess *session)

// page sends a browser without a session to the login form.
func (c *Console) page(h pageHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Token == "" {
			c.disabled(w, r)
			return
		}
		sess := c.sessionOf(r)
		if sess == nil {
			http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, sess)
	})
}

// mutation guards a POST: a live session and its CSRF token in the form,
// else 403 and nothing changes.
func (c *Console) mutation(h pageHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Token == "" {
			c.disabled(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		sess := c.sessionOf(r)
		if sess == nil {
			c.render(w, r, http.StatusForbidden, "error", nil, view{"Message": "Your session has ended: log in again."})
			return
		}
		got := r.PostFormValue("csrf")
		if subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			c.logger.WarnContext(r.Context(), "console request refused: missing or wrong CSRF token", "path", r.URL.Path)
			c.render(w, r, http.StatusForbidden, "error", sess, view{"Message": "This form has expired or did not come from the console: reload the page and try again."})
			return
		}
		h(w, r, sess)
	})
}
