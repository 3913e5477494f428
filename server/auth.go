package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// requireToken guards the command API and River UI with the API token.
// Without a configured token they are off (503), so a forgotten
// RFLOW_API_TOKEN can never leave them open.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.token == "" {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "api_disabled",
				message: "the command API is disabled: start rflow with RFLOW_API_TOKEN set to enable it"})
			return
		}
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rflow"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized",
				message: "missing or wrong bearer token: send Authorization: Bearer $RFLOW_API_TOKEN"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the API token. It is the one
// credential check of every guarded endpoint: a browser session (the run
// console's cookie) is accepted by extending it here.
func (s *Server) authorized(r *http.Request) bool {
	if s.token == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && s.tokenMatches(strings.TrimSpace(got))
}

// tokenMatches compares digests, so the comparison takes the same time
// whatever the length of the presented token.
func (s *Server) tokenMatches(got string) bool {
	want := sha256.Sum256([]byte(s.token))
	digest := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(digest[:], want[:]) == 1
}

// readBody reads the whole body up to the server's limit: 413 beyond it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.bodyLimit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			message: fmt.Sprintf("the request body is over the limit of %d bytes", s.bodyLimit)}
	}
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "bad_body",
			message: "could not read the request body"}
	}
	return body, nil
}
