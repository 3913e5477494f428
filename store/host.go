package store

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// hostIdentity names the process namespace this process's pid lives in:
// host name, boot and pid namespace. Two rflow processes with the same
// identity can tell by pid whether the other is still running; processes
// with different ones (other machines, other containers) cannot, and wait
// out the grace instead. Empty when it cannot be read (not Linux, say).
func hostIdentity() string {
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return host + "|" + strings.TrimSpace(string(boot)) + "|" + ns
}

// processGone reports whether no process has pid in this namespace.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}
