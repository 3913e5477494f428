package server

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/rflow-dev/rflow/workflow"
)

// Untrusted input is checked before anything is stored: a body or header
// Postgres would refuse (a NUL, bytes that are not UTF-8, a number too long
// for numeric) or that is nested too deeply is the caller's mistake, a 400
// naming the reason, never a 500 that asks for a retry doomed to fail.

// checkInput refuses a request's headers or body when rflow could not store
// them. A PUT is a deploy, a definition (YAML or JSON) whose content the
// parser checks with positions; every other body (webhooks, commands) is
// JSON.
func checkInput(r *http.Request, body []byte) *apiError {
	if aerr := checkHeaders(r.Header); aerr != nil {
		return aerr
	}
	if r.Method == http.MethodPut {
		return checkDefinitionBody(body)
	}
	return checkJSONBody(body)
}

// checkJSONBody refuses a JSON body rflow cannot store (workflow.CheckJSON).
func checkJSONBody(body []byte) *apiError {
	if err := workflow.CheckJSON(body); err != nil {
		return badBody(err)
	}
	return nil
}

// checkDefinitionBody refuses a workflow definition (YAML or JSON) that is
// not text; what is inside is the parser's to check, with positions.
func checkDefinitionBody(body []byte) *apiError {
	if err := workflow.CheckText(body); err != nil {
		return badBody(err)
	}
	return nil
}

func badBody(err error) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "bad_body",
		message: "the request body cannot be stored: " + err.Error()}
}

// checkHeaders refuses header values that are not UTF-8 (net/http already
// refuses NUL and other control bytes): they would be stored, or be read by
// an idempotency key.
func checkHeaders(h http.Header) *apiError {
	for name, vs := range h {
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return &apiError{status: http.StatusBadRequest, code: "bad_header",
					message: fmt.Sprintf("the value of header %s is not valid UTF-8", name)}
			}
		}
	}
	return nil
}
