package redact_test

import (
	"errors"
	"fmt"

	"github.com/rflow-dev/rflow/redact"
)

func ExampleURL() {
	fmt.Println(redact.URL("https://ops:hunter2@api.example.com/v1/hook?token=abc&v=2"))
	// Output: https://ops:xxxxx@api.example.com/v1/hook?token=xxxxx&v=xxxxx
}

func ExampleError() {
	err := fmt.Errorf("notify: %w", errors.New(`Post "https://api.example.com/hook?token=abc": connection refused`))
	fmt.Println(redact.Error(err))
	// Output: notify: Post "https://api.example.com/hook?token=xxxxx": connection refused
}
