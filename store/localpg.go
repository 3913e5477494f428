package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned when no PostgreSQL server binaries can be found.
var ErrNoPostgres = errors.New("PostgreSQL server binaries (initdb, postgres) not found: " +
	"install them (Debian/Ubuntu: apt-get install postgresql) or set DATABASE_URL / --database-url to an existing server")

// LocalOptions configures a LocalPostgres.
type LocalOptions struct {
	// Dir is the cluster directory. The data directory is Dir/data; it is
	// created with initdb on first use and reused afterwards.
	Dir string

	// Port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int

	// Ephemeral trades durability for speed (fsync off). Tests only: a crash
	// of the machine can corrupt an ephemeral cluster.
	Ephemeral bool

	// Logger receives start/stop messages. Nil discards them.
	Logger *slog.Logger

	// MustExist refuses to create a cluster: StartLocal fails with
	// ErrNoLocalCluster when Dir holds none. Commands that only read or
	// change existing runs use it, so they never initdb as a side effect.
	MustExist bool
}

// ErrNoLocalCluster is returned by StartLocal with MustExist when the
// directory holds no cluster.
var ErrNoLocalCluster = errors.New("no local database cluster")

// LocalPostgres is a PostgreSQL server on a local cluster directory. Usually
// this process started and owns it: the server runs as a child process that
// receives SIGQUIT if this process dies, so a crashed test or a killed
// `rflow dev` leaves no server behind. When another process already runs the
// cluster's server, StartLocal attaches to it instead (Attached): Stop then
// leaves it running.
type LocalPostgres struct {
	dir    string
	port   int
	binDir string
	logger *slog.Logger
	// mu guards the running server's process (cmd, exited, logf), which
	// Supervise replaces when it restarts a server that died.
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	logf   *os.File
	// stopping is set by Stop: the server's exit is then no outage.
	stopping bool
	// runAs and ephemeral are kept so Restart starts the server as before.
	runAs     *user.User
	ephemeral bool
	// attachedPid is the postmaster another process runs (0: ours).
	attachedPid int
}

// FindPostgresBinDir locates the directory holding initdb and postgres: PATH
// first, then `pg_config --bindir`, then /usr/lib/postgresql/*/bin (newest
// version first).
func FindPostgresBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", ErrNoPostgres
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// StartLocal initialises the cluster in opts.Dir if needed, starts the
// server on a loopback port and waits until it accepts connections.
func StartLocal(ctx context.Context, opts LocalOptions) (*LocalPostgres, error) {
	binDir, err := FindPostgresBinDir()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if lp, err := attachLocal(ctx, dir, logger); lp != nil || err != nil {
		return lp, err
	}
	if opts.MustExist {
		if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "data"), ErrNoLocalCluster)
		}
	}
	runAs, err := serverUser()
	if err != nil {
		return nil, err
	}
	lp := &LocalPostgres{dir: dir, port: opts.Port, binDir: binDir, logger: logger, runAs: runAs, ephemeral: opts.Ephemeral}
	if err := lp.prepareDir(runAs); err != nil {
		return nil, err
	}
	if err := lp.initdb(ctx, runAs); err != nil {
		return nil, err
	}
	if lp.port == 0 {
		if lp.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := lp.start(runAs, lp.ephemeral); err != nil {
		return nil, err
	}
	if err := lp.waitReady(ctx, 60*time.Second); err != nil {
		_ = lp.Stop(context.Background())
		return nil, err
	}
	logger.Debug("embedded postgres ready", "dir", lp.DataDir(), "port", lp.port)
	return lp, nil
}

// DataDir is where the cluster keeps its data.
func (lp *LocalPostgres) DataDir() string { return filepath.Join(lp.dir, "data") }

// LogFile is where the server writes its log.
func (lp *LocalPostgres) LogFile() string { return filepath.Join(lp.dir, "postgres.log") }

// Port is the loopback TCP port the server listens on.
func (lp *LocalPostgres) Port() int { return lp.port }

// URL returns a connection URL for database on this server.
func (lp *LocalPostgres) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", lp.port, database)
}

// Pid is the postmaster's process id.
func (lp *LocalPostgres) Pid() int {
	if lp.attachedPid != 0 {
		return lp.attachedPid
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.cmd.Process.Pid
}

// Attached reports whether another process runs this server: StartLocal
// found it running and connected to it rather than starting one.
func (lp *LocalPostgres) Attached() bool { return lp.attachedPid != 0 }

// attachLocal finds the server another process runs on the cluster in dir
// (its postmaster.pid names a live process and the port it listens on) and
// waits until it accepts connections. It returns nil, nil when none runs:
// then the caller starts one. Starting a second postmaster would only fail
// with "lock file postmaster.pid already exists".
func attachLocal(ctx context.Context, dir string, logger *slog.Logger) (*LocalPostgres, error) {
	pid, port, ok := runningPostmaster(filepath.Join(dir, "data"))
	if !ok {
		return nil, nil
	}
	lp := &LocalPostgres{dir: dir, port: port, logger: logger, attachedPid: pid}
	if err := lp.waitReady(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("the postgres already running on %s (pid %d, port %d) does not answer: %w", lp.DataDir(), pid, port, err)
	}
	logger.Debug("attached to the running embedded postgres", "dir", lp.DataDir(), "pid", pid, "port", port)
	return lp, nil
}

// runningPostmaster reads dataDir/postmaster.pid: its first line is the
// postmaster's pid, its fourth the port. A file left by a server that died
// (its pid no longer a postgres process) does not count.
func runningPostmaster(dataDir string) (pid, port int, ok bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, 0, false // still being written: the server is starting
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, err2 := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err1 != nil || err2 != nil || pid <= 0 || port <= 0 {
		return 0, 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, 0, false
	}
	// The pid may have been reused by an unrelated process since.
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err == nil && !strings.Contains(filepath.Base(exe), "postgres") {
		return 0, 0, false
	}
	return pid, port, true
}

// Stop shuts the server down (fast shutdown: open sessions are closed) and
// waits for it to exit. It is safe to call more than once. A server this
// process attached to keeps running.
func (lp *LocalPostgres) Stop(ctx context.Context) error {
	lp.mu.Lock()
	lp.stopping = true
	cmd, exited, logf := lp.cmd, lp.exited, lp.logf
	lp.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		<-exited
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		<-exited
	}
	if logf != nil {
		logf.Close()
	}
	lp.logger.Debug("embedded postgres stopped", "dir", lp.DataDir())
	return nil
}

// ShutdownMode is how Restart stops the server, as in `pg_ctl -m`.
type ShutdownMode string

const (
	// ShutdownFast closes every session and checkpoints (SIGINT).
	ShutdownFast ShutdownMode = "fast"
	// ShutdownImmediate aborts every process without a checkpoint, as a
	// crash would; the server replays its WAL when it starts (SIGQUIT).
	ShutdownImmediate ShutdownMode = "immediate"
)

// Restart stops the server in mode, keeps it down for down, and starts it
// again on the same port: what an operator's `pg_ctl restart` (or an
// outage) does to the processes connected to it.
func (lp *LocalPostgres) Restart(ctx context.Context, mode ShutdownMode, down time.Duration) error {
	if lp.Attached() {
		return errors.New("restart postgres: another process runs it")
	}
	sig := syscall.SIGINT
	if mode == ShutdownImmediate {
		sig = syscall.SIGQUIT
	}
	lp.mu.Lock()
	cmd, exited, logf := lp.cmd, lp.exited, lp.logf
	lp.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	logf.Close()
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := lp.start(lp.runAs, lp.ephemeral); err != nil {
		return err
	}
	return lp.waitReady(ctx, 60*time.Second)
}

// serverUser is the unprivileged account the server runs as when this
// process is root (initdb and postgres refuse to run as root). Nil means run
// as the current user.
func serverUser() (*user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := user.Lookup(name); err == nil {
			return u, nil
		}
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run the server: " +
		"create one (useradd --system postgres) or set DATABASE_URL")
}

func (lp *LocalPostgres) prepareDir(runAs *user.User) error {
	if err := os.MkdirAll(lp.DataDir(), 0o700); err != nil {
		return fmt.Errorf("create postgres data directory: %w", err)
	}
	if runAs == nil {
		return nil
	}
	uid, gid := ids(runAs)
	for _, p := range []string{lp.dir, lp.DataDir()} {
		if err := os.Chown(p, uid, gid); err != nil {
			return fmt.Errorf("give %s to user %s: %w", p, runAs.Username, err)
		}
	}
	// The server user must be able to reach the directory from /.
	for p := filepath.Dir(lp.dir); p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("postgres runs as user %s, which cannot enter %s (mode %v): choose a data directory it can reach, or set DATABASE_URL",
				runAs.Username, p, fi.Mode().Perm())
		}
	}
	return nil
}

func ids(u *user.User) (int, int) {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

func (lp *LocalPostgres) command(runAs *user.User, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(lp.binDir, name), args...)
	cmd.Dir = lp.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if runAs != nil {
		uid, gid := ids(runAs)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.Env = append(cmd.Env, "HOME="+lp.dir, "USER="+runAs.Username)
	}
	return cmd
}

func (lp *LocalPostgres) initdb(ctx context.Context, runAs *user.User) error {
	if _, err := os.Stat(filepath.Join(lp.DataDir(), "PG_VERSION")); err == nil {
		return nil
	}
	cmd := lp.command(runAs, "initdb", "-D", lp.DataDir(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb in %s: %w: %s", lp.DataDir(), err, lastLine(out))
	}
	return ctx.Err()
}

func (lp *LocalPostgres) start(runAs *user.User, ephemeral bool) error {
	args := []string{"-D", lp.DataDir(), "-p", strconv.Itoa(lp.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=400",
		"-c", "shared_buffers=128MB",
	}
	if ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	logf, err := os.OpenFile(filepath.Join(lp.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open postgres log: %w", err)
	}
	cmd := lp.command(runAs, "postgres", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	lp.mu.Lock()
	lp.cmd, lp.logf, lp.exited = cmd, logf, exited
	lp.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

func (lp *LocalPostgres) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	lp.mu.Lock()
	exited := lp.exited
	lp.mu.Unlock()
	for {
		select {
		case <-exited:
			return fmt.Errorf("postgres exited during start: %s (log: %s)", lp.tailLog(), filepath.Join(lp.dir, "postgres.log"))
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, lp.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s: %w", limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (lp *LocalPostgres) tailLog() string {
	f, err := os.Open(filepath.Join(lp.dir, "postgres.log"))
	if err != nil {
		return "no log"
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return lastLine(b)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
