package store

import (
	"errors"
	"os"
	"strconv"
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

// processGone reports whether no live process has pid in this namespace:
// none at all, or a zombie (it died and its parent has not reaped it yet,
// as right after a kill -9; it runs nothing any more).
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses, so the
	// state is the field after the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && strings.HasPrefix(strings.TrimLeft(string(stat[i+1:]), " "), "Z")
}
