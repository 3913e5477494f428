package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter measures the CPU a benchmark round costs this process and the
// Postgres cluster its pool talks to (the postmaster, its live children and
// the children it has reaped): on a shared machine a rate is noise, but the
// CPU per unit of work is not.
type cpuMeter struct {
	postmaster int
	goStart    time.Duration
	pgStart    time.Duration
}

// startCPU starts measuring; it returns nil where /proc cannot be read.
func startCPU(ctx context.Context, pool *pgxpool.Pool) *cpuMeter {
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return nil
	}
	f, err := procStat(backend)
	if err != nil || len(f) < 2 {
		return nil
	}
	pm, _ := strconv.Atoi(f[1])
	m := &cpuMeter{postmaster: pm}
	m.goStart, m.pgStart = selfCPU(), m.clusterCPU()
	return m
}

// perUnit returns the CPU time per unit of work since start, of this
// process and of Postgres.
func (m *cpuMeter) perUnit(units int) (goCPU, pgCPU time.Duration) {
	if m == nil || units == 0 {
		return 0, 0
	}
	return (selfCPU() - m.goStart) / time.Duration(units), (m.clusterCPU() - m.pgStart) / time.Duration(units)
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clusterCPU is the postmaster's own and its children's CPU, live and reaped.
func (m *cpuMeter) clusterCPU() time.Duration {
	const tick = 10 * time.Millisecond // USER_HZ = 100 on Linux
	sum := func(f []string, from, to int) (n int64) {
		for i := from; i <= to && i < len(f); i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	var ticks int64
	if f, err := procStat(m.postmaster); err == nil {
		ticks += sum(f, 11, 14) // utime, stime, cutime, cstime
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil || len(f) < 13 || f[1] != strconv.Itoa(m.postmaster) {
			continue
		}
		ticks += sum(f, 11, 12)
	}
	return time.Duration(ticks) * tick
}

// backendCPU is the user+system CPU time, in clock ticks, that Postgres
// backend pid has used (0 where /proc cannot tell, as for a server on
// another machine).
func backendCPU(pid uint32) int64 {
	f, err := procStat(int(pid))
	if err != nil || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// procStat returns the fields of /proc/pid/stat after the command name:
// [0] state, [1] ppid, ... [11] utime, [12] stime, [13] cutime, [14] cstime.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("pid %d: malformed stat", pid)
	}
	return strings.Fields(s[i+1:]), nil
}
