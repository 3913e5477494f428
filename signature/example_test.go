package signature_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rflow-dev/rflow/signature"
)

// A sender signs a webhook body with the trigger's secret and the current
// unix time; rflow accepts it for five minutes.
func ExampleSign() {
	body := []byte(`{"event_id":"evt_42"}`)
	ts := "1764505200" // strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/hooks/on-payment", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signature.HeaderTimestamp, ts)
	req.Header.Set(signature.HeaderSignature, signature.Sign("hook-secret", ts, body))
	// The same value as: printf "%s.%s" "$ts" "$body" | openssl dgst -sha256 -hmac "$secret"
	fmt.Println(req.Header.Get(signature.HeaderSignature))
	// Output: sha256=63ed083e4560d3706a814a58d22b75a4192e01be996f0ff41edca5c8514dd1f2
}

// A receiver of rflow's http_call or notify checks the body it read against
// the step's hmac_secret.
func ExampleVerify() {
	body := []byte(`{"run_id":"r-1"}`)
	sent := time.Unix(1764505200, 0)
	h := http.Header{}
	signature.SetHeaders(h, "s3cret", body, sent)

	fmt.Println(signature.Verify("s3cret", h, body, sent.Add(time.Minute)))
	fmt.Println(signature.Verify("wrong", h, body, sent.Add(time.Minute)))
	fmt.Println(signature.Verify("s3cret", h, body, sent.Add(time.Hour)))
	// Output:
	// <nil>
	// wrong signature: it does not match the body under this secret
	// stale signature: X-Rflow-Timestamp is more than 5m0s away from the receiver's clock
}

// A sender signs a webhook into rflow with the v2 scheme: the timestamp,
// method, path, the header the trigger's idempotency key reads, and the
// body. docs/http.md shows the same signature made with curl and openssl.
func ExampleSignRequest() {
	body := []byte(`{"event_id":"evt_42","amount":5}`)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/hooks/on-payment", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Idempotency-Key", "evt_42")
	signature.SignRequest(req, "hook-secret", body, []string{"x-idempotency-key"}, time.Unix(1764505200, 0))
	fmt.Println(req.Header.Get(signature.HeaderSignedHeaders))
	fmt.Println(req.Header.Get(signature.HeaderSignature))
	// Output:
	// x-idempotency-key
	// v2=9f60a07cf056df97ffa8e50a6aa5a454bfb17227546c420a30dd2905e2eb4129
}
