package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// decodeBody decodes an optional JSON command body into v: an empty body
// leaves v as it is; a body that is not one object of v's fields (bad
// JSON, an unknown field, trailing data) is a 400 malformed_json saying
// that the body must be shape. A misspelt field is refused rather than
// dropped.
func decodeBody(body []byte, v any, shape string) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = fmt.Errorf("unexpected data after the object")
	}
	if err != nil {
		return &apiError{status: http.StatusBadRequest, code: "malformed_json",
			message: fmt.Sprintf("the body must be %s: %v", shape, err)}
	}
	return nil
}
