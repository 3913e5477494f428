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

// requireToken guards the command API with the bearer token. Without a
// configured token the API is off (503), so a forgotten RFLOW_API_TOKEN can
// never leave it open.
func (s *Server) requireToken(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.token == "" {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "api_disabled",
				message: "the command API is disabled: start rflow with RFLOW_API_TOKEN set to enable it"})
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		// Compare digests so the comparison takes the same time whatever
		// the length of the presented token.
		digest := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(digest[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rflow"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized",
				message: "missing or wrong bearer token: send Authorization: Bearer $RFLOW_API_TOKEN"})
			return
		}
		next.ServeHTTP(w, r)
	})
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
