package server_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rflow-dev/rflow/server"
)

// A sender signs a webhook body with the trigger's secret and the current
// unix time; rflow accepts it for five minutes.
func ExampleSign() {
	body := []byte(`{"event_id":"evt_42"}`)
	ts := "1764505200" // strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/hooks/on-payment", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.HeaderTimestamp, ts)
	req.Header.Set(server.HeaderSignature, server.Sign("hook-secret", ts, body))
	// The same value as: printf "%s.%s" "$ts" "$body" | openssl dgst -sha256 -hmac "$secret"
	fmt.Println(req.Header.Get(server.HeaderSignature))
	// Output: sha256=63ed083e4560d3706a814a58d22b75a4192e01be996f0ff41edca5c8514dd1f2
}
