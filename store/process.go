package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// ProcessID names one life of this process among all that share the
// database: host, pid and a random suffix (pids are reused after a restart;
// the suffix tells two lives apart). River client ids, and through them
// node rows, and lease owners are process ids.
func ProcessID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
