package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/workflow"
)

// SessionCookie is the name of the console's session cookie. It holds an
// opaque random id; the session (and its CSRF token) lives in this
// process's memory, so a restart logs everyone out.
const SessionCookie = "rflow_session"

// session is one logged-in browser, acting as the token it logged in with.
type session struct {
	id        string
	csrf      string
	expires   time.Time
	principal access.Principal
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

func (s *sessions) create(p access.Principal) *session {
	sess := &session{id: randomToken(), csrf: randomToken(), expires: time.Now().Add(s.ttl), principal: p}
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

// loopbackSession logs a browser on this machine in as the full-access
// token, when Config.LoopbackLogin allows it: the request came straight
// from a loopback address (no proxy between) and names a loopback host, so
// a page of another site that resolves its name to 127.0.0.1 (DNS
// rebinding) is not let in. It returns nil otherwise.
func (c *Console) loopbackSession(w http.ResponseWriter, r *http.Request) *session {
	if !c.cfg.LoopbackLogin || !loopbackPeer(r) || !loopbackHost(r.Host) {
		return nil
	}
	sess := c.sessions.create(access.Principal{Name: workflow.FullAccessToken, Roles: workflow.Roles()})
	c.setCookie(w, r, sess.id, int(c.cfg.SessionTTL/time.Second))
	return sess
}

func loopbackPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback() && r.Header.Get("X-Forwarded-For") == "" && r.Header.Get("Forwarded") == ""
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// sessionOf returns the request's live session, or nil.
func (c *Console) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// Session returns the principal of r's live console session: the
// browser's credential for pages mounted next to the console (River UI).
func (c *Console) Session(r *http.Request) (access.Principal, bool) {
	sess := c.sessionOf(r)
	if sess == nil {
		return access.Principal{}, false
	}
	return sess.principal, true
}

func (c *Console) enabled() bool { return c.cfg.Keyring.Enabled() }

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.cfg.Proxies.Secure(r),
	})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.enabled() {
		c.disabled(w, r)
		return
	}
	c.render(w, r, http.StatusOK, "login", nil, view{"Next": c.localNext(r.URL.Query().Get("next"))})
}

// login checks a token, slowly for a client that keeps failing: after
// access.FreeFailures wrong tokens it must wait (429 with Retry-After)
// before the next try is even checked.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.enabled() {
		c.disabled(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := c.localNext(r.PostFormValue("next"))
	client := c.cfg.Proxies.Client(r)
	if wait := c.throttle.Wait(client); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.logger.WarnContext(r.Context(), "console login refused: too many wrong tokens", "client", client, "retry_after_s", secs)
		c.render(w, r, http.StatusTooManyRequests, "login", nil, view{"Next": next,
			"Error": fmt.Sprintf("Too many wrong tokens from your address: try again in %d s.", secs)})
		return
	}
	p, ok := c.cfg.Keyring.Lookup(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		c.throttle.Failed(client)
		c.logger.WarnContext(r.Context(), "console login refused: wrong token", "client", client)
		c.render(w, r, http.StatusUnauthorized, "login", nil, view{"Next": next, "Error": "That is not the API token or one of the project's api: tokens."})
		return
	}
	c.throttle.Succeeded(client)
	sess := c.sessions.create(p)
	c.setCookie(w, r, sess.id, int(c.cfg.SessionTTL/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	c.sessions.drop(sess.id)
	c.setCookie(w, r, "", -1)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// localNext keeps a post-login redirect inside the console (or River UI,
// when it is mounted).
func (c *Console) localNext(next string) string {
	u, err := url.Parse(next)
	inside := err == nil && (strings.HasPrefix(u.Path, Prefix) || (c.cfg.RiverUI && strings.HasPrefix(u.Path, RiverUIPrefix+"/")))
	if !inside || next == "" || u.IsAbs() || u.Host != "" || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return Prefix
	}
	return u.RequestURI()
}

func (c *Console) disabled(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusServiceUnavailable, "error", nil,
		view{"Message": "The console is disabled: start rflow with RFLOW_API_TOKEN set (or api: tokens: in the project file) to enable it."})
}

// pageHandler is a console page for a logged-in browser.
type pageHandler func(w http.ResponseWriter, r *http.Request, sess *session)

// page sends a browser without a session to the login form; a session
// whose token lacks the read role sees what it may do instead of the page.
func (c *Console) page(h pageHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.enabled() {
			c.disabled(w, r)
			return
		}
		sess := c.sessionOf(r)
		if sess == nil {
			sess = c.loopbackSession(w, r)
		}
		if sess == nil {
			http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if !sess.principal.Has(workflow.RoleRead) {
			c.render(w, r, http.StatusForbidden, "error", sess, view{"Message": fmt.Sprintf(
				"Token %s does not hold the read role (it holds %s), so the console shows it nothing.",
				sess.principal.Name, sess.principal.RoleList())})
			return
		}
		h(w, r, sess)
	})
}

// mutation guards a POST: a live session whose token holds role (any
// token when role is ""), and its CSRF token in the form, else 403 and
// nothing changes.
func (c *Console) mutation(role workflow.Role, h pageHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.enabled() {
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
		if role != "" && !sess.principal.Has(role) {
			c.render(w, r, http.StatusForbidden, "error", sess, view{"Message": fmt.Sprintf(
				"This needs the %s role; token %s holds %s.", role, sess.principal.Name, sess.principal.RoleList())})
			return
		}
		h(w, r, sess)
	})
}
