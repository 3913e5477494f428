package anviltest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// WithoutFinalityTags serves JSON-RPC in front of url, forwarding every
// call but eth_getBlockByNumber("safe" | "finalized"), which it answers
// with null, as a node of a chain without finality tags does. It returns
// the proxy's URL; the proxy stops when the test ends.
func WithoutFinalityTags(t testing.TB, url string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var call struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params []any           `json:"params"`
		}
		if json.Unmarshal(body, &call) == nil && call.Method == "eth_getBlockByNumber" && len(call.Params) > 0 &&
			(call.Params[0] == "safe" || call.Params[0] == "finalized") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":null}`))
			return
		}
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
