package workflow

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"

	"github.com/rflow-dev/rflow/redact"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// LookupEnv resolves ${VAR} references; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Strict turns warnings into errors.
	Strict bool
	// AllowUnsetEnv tolerates ${VAR} references to unset variables: the
	// field is left out (a wallet has no key, a network one RPC URL fewer)
	// instead of failing the load. For commands that only write to the
	// database (runs retry, workflows resume): they compile workflows but
	// sign and call nothing, so they must not need the secrets of the
	// process that works the runs. A wallet's keystore file may be missing
	// too.
	AllowUnsetEnv bool
}

// maxFileSize bounds every file the loader reads (project, includes, ABIs).
const maxFileSize = 16 << 20

// Load reads, checks and compiles the project file at path with everything
// it includes. When the project is invalid the error is a Diagnostics
// holding every problem (errors and warnings) with its position; warnings of
// a valid project are in Project.Warnings. Load never panics.
func Load(path string, opts LoadOptions) (*Project, error) {
	l := newLoader(opts.LookupEnv)
	l.p.Dir = filepath.Dir(path)
	l.p.file = filepath.Base(path)
	l.p.allowUnsetEnv = opts.AllowUnsetEnv
	src, err := l.read(path)
	if errors.Is(err, errIsDir) {
		l.errorf(Position{File: path}, "cannot read the project file: it is a directory (give the project file in it, e.g. %s)",
			filepath.Join(path, "rflow.yaml"))
		return nil, l.finish(opts.Strict)
	}
	if err != nil {
		l.errorf(Position{File: path}, "cannot read the project file: %v", unwrapPathError(errors.Unwrap(err)))
		return nil, l.finish(opts.Strict)
	}
	docs, ds := parseYAML(path, src)
	l.all = append(l.all, ds...)
	switch {
	case len(ds) > 0:
	case len(docs) != 1:
		l.errorf(Position{File: path, Line: 1, Col: 1}, "the project file must hold exactly one YAML document, found %d", len(docs))
	default:
		l.project(docs[0])
	}
	if err := l.finish(opts.Strict); err != nil {
		return nil, err
	}
	return l.p, nil
}

func newLoader(lookupEnv func(string) (string, bool)) *loader {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	return &loader{p: &Project{lookupEnv: lookupEnv}, lookupEnv: lookupEnv}
}

// finish sorts the diagnostics, applies Strict, and returns them as the
// error when any is an error.
func (l *loader) finish(strict bool) error {
	if strict {
		for i := range l.all {
			l.all[i].Severity = SeverityError
		}
	}
	sortDiagnostics(l.all)
	if l.all.HasErrors() {
		return l.all
	}
	l.p.Warnings = l.all
	return nil
}

// Errors of readFile beyond the file system's own.
var (
	errIsDir        = errors.New("is a directory")
	errFileTooLarge = fmt.Errorf("file larger than %d bytes", maxFileSize)
)

// read is readFile that keeps what it read as one of the project's
// sources (Project.Sources).
func (l *loader) read(path string) ([]byte, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if l.p.sources == nil {
		l.p.sources = map[string][]byte{}
	}
	rel, rerr := filepath.Rel(l.p.Dir, path)
	if rerr != nil || !filepath.IsLocal(rel) {
		l.p.sourcesOutside = true
	} else {
		l.p.sources[filepath.ToSlash(rel)] = src
	}
	return src, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathError(err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("read %s: %w", path, errIsDir)
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("read %s: %w", path, errFileTooLarge)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathError(err))
	}
	return buf.Bytes(), nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// project builds the Project from the document root.
func (l *loader) project(root *node) {
	m := l.fields(root, "the project", "name", "database_url", "env", "networks", "wallets", "contracts", "workflows",
		"idempotency", "notifiers", "api")
	if m == nil {
		return
	}
	l.idempotency(m["idempotency"])
	if n := l.required(m, root, "name", "project"); n != nil {
		l.p.Name = l.str(n, "name")
		if l.p.Name != "" && !namePattern.MatchString(l.p.Name) {
			l.errorf(n.pos, "project name %q must start with a letter and hold only letters, digits, - and _", l.p.Name)
		}
	}
	if n := m["database_url"]; !n.isNull() {
		l.p.DatabaseURL = l.str(n, "database_url")
		if u, err := url.Parse(l.p.DatabaseURL); err == nil && u.User != nil && !envRef.MatchString(scalarText(n.val)) {
			if _, has := u.User.Password(); has {
				l.warnf(n.pos, "database_url holds a password written literally; put the URL in an environment variable and write ${DATABASE_URL}, so the password stays out of the file")
			}
		}
	}
	for _, n := range l.list(m["networks"], "networks", false) {
		l.network(n)
	}
	for _, n := range l.list(m["wallets"], "wallets", false) {
		l.wallet(n)
	}
	for _, n := range l.list(m["contracts"], "contracts", false) {
		l.contract(n)
	}
	for _, n := range l.list(m["notifiers"], "notifiers", false) {
		l.notifier(n)
	}
	if n := m["api"]; !n.isNull() {
		l.apiConfig(n)
	}
	secretRefs := map[string]string{}
	envRefsIn(m["database_url"], "the database URL", secretRefs)
	for _, n := range l.list(m["wallets"], "wallets", false) {
		name := nameOf(n)
		envRefsIn(n.get("private_key"), "wallet "+name+"'s private key", secretRefs)
		envRefsIn(n.get("password"), "wallet "+name+"'s keystore password", secretRefs)
	}
	if tokens := m["api"].get("tokens"); tokens != nil {
		for _, n := range tokens.items {
			envRefsIn(n.get("token"), "API token "+nameOf(n), secretRefs)
		}
	}
	var wfs []*node
	for _, n := range l.list(m["workflows"], "workflows", false) {
		if inc := n.get("include"); inc != nil {
			l.fields(n, "include", "include")
			wfs = append(wfs, l.include(inc)...)
			continue
		}
		wfs = append(wfs, n)
	}
	l.collectSecrets(secretRefs, wfs)
	l.secrets = l.p.secretVars
	// A variable a workflow uses as its webhook or HMAC secret is as
	// secret as a wallet's key: env: may not expose it either.
	for name, sv := range l.secrets {
		if sv.signing {
			secretRefs[name] = sv.why[len("it holds "):]
		}
	}
	l.envAllowlist(m["env"], secretRefs)
	seen := map[string]Position{}
	for _, n := range wfs {
		w := l.workflow(n)
		if w == nil || w.Name == "" {
			continue
		}
		if first, dup := seen[w.Name]; dup {
			l.errorf(w.Pos, "duplicate workflow name %q (first defined at %s)", w.Name, first)
			continue
		}
		seen[w.Name] = w.Pos
		l.p.Workflows = append(l.p.Workflows, w)
	}
	l.checkNotifierRefs()
}

// nameOf is the text of mapping n's name key, or "" (a missing name is
// reported where the mapping is read).
func nameOf(n *node) string {
	if nn := n.get("name"); nn != nil {
		return scalarText(nn.val)
	}
	return ""
}

// include expands an include glob into workflow nodes. A file holds one
// workflow (a mapping) or several (a list).
func (l *loader) include(n *node) []*node {
	var out []*node
	for _, pn := range l.list(n, "include", true) {
		pattern, ok := l.scalar(pn, "include")
		if !ok {
			continue
		}
		full := pattern
		if !filepath.IsAbs(full) {
			full = filepath.Join(l.p.Dir, pattern)
		}
		matches, err := filepath.Glob(full)
		if err != nil {
			l.errorf(pn.pos, "include %q: %v", pattern, err)
			continue
		}
		if len(matches) == 0 {
			l.errorf(pn.pos, "include %q matches no files", pattern)
			continue
		}
		sort.Strings(matches)
		for _, file := range matches {
			src, err := l.read(file)
			if err != nil {
				l.errorf(pn.pos, "include: %v", err)
				continue
			}
			docs, ds := parseYAML(file, src)
			l.all = append(l.all, ds...)
			for _, d := range docs {
				if d.kind == nodeSeq {
					out = append(out, d.items...)
				} else {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

func (l *loader) network(n *node) {
	m := l.fields(n, "network", "name", "chain_id", "rpc", "ws", "confirmations", "block_poll_interval", "max_block_range",
		"finality", "currency", "explorer")
	if m == nil {
		return
	}
	net := &Network{Pos: n.pos, Confirmations: DefaultConfirmations, BlockPollInterval: DefaultBlockPollInterval, MaxBlockRange: DefaultMaxBlockRange}
	if nn := l.required(m, n, "name", "network"); nn != nil {
		net.Name = l.uniqueName(nn, "network", l.networkNames())
	}
	if c := l.required(m, n, "chain_id", "network "+net.Name); c != nil {
		if id, ok := l.integer(c, "chain_id", 1, math.MaxInt64); ok {
			net.ChainID = uint64(id)
		}
	}
	if r := l.required(m, n, "rpc", "network "+net.Name); r != nil {
		for _, u := range l.list(r, "rpc", true) {
			s, ok := l.scalar(u, "rpc")
			if ok && l.checkURL(u.pos, "rpc", s, "http", "https", "ws", "wss") {
				net.RPC = append(net.RPC, s)
			}
		}
	}
	if w := m["ws"]; !w.isNull() {
		if s, ok := l.scalar(w, "ws"); ok && l.checkURL(w.pos, "ws", s, "ws", "wss") {
			net.WS = s
		}
	}
	if c := m["confirmations"]; !c.isNull() {
		if v, ok := l.integer(c, "confirmations", 0, 10_000); ok {
			net.Confirmations = int(v)
			if v == 0 {
				l.warnf(c.pos, "network %s: confirmations: 0 acts on unconfirmed blocks; a reorg can undo what triggered a run", net.Name)
			}
		}
	}
	if d := m["block_poll_interval"]; !d.isNull() {
		if v, ok := l.duration(d, "block_poll_interval"); ok {
			net.BlockPollInterval = v
		}
	}
	if r := m["max_block_range"]; !r.isNull() {
		if v, ok := l.integer(r, "max_block_range", 1, 1_000_000); ok {
			net.MaxBlockRange = uint64(v)
		}
	}
	l.networkFinality(m["finality"], net)
	l.networkCurrency(m["currency"], net)
	l.networkExplorer(m["explorer"], net)
	l.p.Networks = append(l.p.Networks, net)
}

func (l *loader) networkNames() []string {
	var out []string
	for _, n := range l.p.Networks {
		out = append(out, n.Name)
	}
	return out
}

func (l *loader) walletNames() []string {
	var out []string
	for _, w := range l.p.Wallets {
		out = append(out, w.Name)
	}
	return out
}

func (l *loader) contractNames() []string {
	var out []string
	for _, c := range l.p.Contracts {
		out = append(out, c.Name)
	}
	return out
}

// uniqueName reads a name and checks its form and uniqueness among taken.
func (l *loader) uniqueName(n *node, what string, taken []string) string {
	s := l.str(n, what+" name")
	if s == "" {
		return ""
	}
	if !namePattern.MatchString(s) {
		l.errorf(n.pos, "%s name %q must start with a letter and hold only letters, digits, - and _", what, s)
	}
	if contains(taken, s) {
		l.errorf(n.pos, "duplicate %s name %q", what, s)
	}
	return s
}

func (l *loader) checkURL(pos Position, what, s string, schemes ...string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || !contains(schemes, strings.ToLower(u.Scheme)) {
		l.errorf(pos, "%s %q is not a valid %s URL", what, redact.URL(s), strings.Join(schemes, "/"))
		return false
	}
	return true
}

// networkRef resolves a network name, reporting unknown names.
func (l *loader) networkRef(n *node, what string) string {
	s := l.str(n, what)
	if s == "" {
		return ""
	}
	if l.p.Network(s) == nil {
		l.errorf(n.pos, "unknown network %s%s", s, suggest(s, l.networkNames()))
		return ""
	}
	return s
}

// defaultNetwork is the project's only network, when it has exactly one.
func (l *loader) defaultNetwork() string {
	if len(l.p.Networks) == 1 {
		return l.p.Networks[0].Name
	}
	return ""
}

func (l *loader) wallet(n *node) {
	m := l.fields(n, "wallet", "name", "private_key", "keystore", "password", "max_fee", "max_priority_fee")
	if m == nil {
		return
	}
	w := &Wallet{Pos: n.pos}
	if nn := l.required(m, n, "name", "wallet"); nn != nil {
		w.Name = l.uniqueName(nn, "wallet", l.walletNames())
	}
	pk, ks := m["private_key"], m["keystore"]
	switch {
	case !pk.isNull() && !ks.isNull():
		l.errorf(n.pos, "wallet %s: set either private_key or keystore, not both", w.Name)
	case !pk.isNull():
		if s := l.secretScalar(pk, "wallet "+w.Name+": private_key").Reveal(); s != "" {
			raw := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
			if b, err := hex.DecodeString(raw); err != nil || len(b) != 32 {
				// Never echo the value: it is (or is meant to be) a secret.
				l.errorf(pk.pos, "wallet %s: private_key is not a 32-byte hex key", w.Name)
			} else {
				w.PrivateKey = Secret(s)
			}
		}
		if !m["password"].isNull() {
			l.errorf(keyPos(n, "password"), "wallet %s: password goes with keystore, not private_key", w.Name)
		}
	case !ks.isNull():
		if s, ok := l.scalar(ks, "keystore"); ok {
			path := s
			if !filepath.IsAbs(path) {
				path = filepath.Join(l.p.Dir, path)
			}
			// A keystore is a secret too: AllowUnsetEnv loads (for commands
			// that sign nothing) without it.
			if st, err := os.Stat(path); (err != nil || st.IsDir()) && !l.p.allowUnsetEnv {
				l.errorf(ks.pos, "wallet %s: keystore file %s not found", w.Name, s)
			}
			w.Keystore = path
		}
		if pw := m["password"]; !pw.isNull() {
			w.Password = l.secretScalar(pw, "wallet "+w.Name+": password")
		}
	default:
		l.errorf(n.pos, "wallet %s: needs private_key or keystore", w.Name)
	}
	w.MaxFee = l.perGas(m["max_fee"], "wallet "+w.Name+" max_fee")
	w.MaxPriorityFee = l.perGas(m["max_priority_fee"], "wallet "+w.Name+" max_priority_fee")
	if w.MaxFee != nil && w.MaxPriorityFee != nil && w.MaxPriorityFee.Cmp(w.MaxFee) > 0 {
		l.errorf(m["max_priority_fee"].pos, "wallet %s: max_priority_fee (%s wei) is above max_fee (%s wei): a tip is part of the fee",
			w.Name, w.MaxPriorityFee, w.MaxFee)
	}
	l.p.Wallets = append(l.p.Wallets, w)
}

// perGas reads an optional price per gas ("30 gwei", or an integer in
// wei); nil when absent or invalid (reported).
func (l *loader) perGas(n *node, what string) *big.Int {
	if n.isNull() {
		return nil
	}
	s, ok := l.scalar(n, what)
	if !ok {
		return nil
	}
	amt, err := parseAmount(s)
	if err != nil || amt.Sign() <= 0 {
		l.errorf(n.pos, "%s %q must be a positive price per gas like \"30 gwei\" or an integer in wei", what, s)
		return nil
	}
	return amt
}

func (l *loader) contract(n *node) {
	m := l.fields(n, "contract", "name", "abi", "network", "address", "start_block", "token")
	if m == nil {
		return
	}
	c := &Contract{Pos: n.pos}
	if nn := l.required(m, n, "name", "contract"); nn != nil {
		c.Name = l.uniqueName(nn, "contract", l.contractNames())
	}
	if a := l.required(m, n, "abi", "contract "+c.Name); a != nil {
		if s, ok := l.scalar(a, "abi"); ok {
			c.ABI = l.loadABI(a.pos, s)
		}
	}
	if nw := m["network"]; !nw.isNull() {
		c.Network = l.networkRef(nw, "network")
	} else if c.Network = l.defaultNetwork(); c.Network == "" {
		l.errorf(n.pos, "contract %s: %s", c.Name, needNetwork(len(l.p.Networks)))
	}
	if a := l.required(m, n, "address", "contract "+c.Name); a != nil {
		if s, ok := l.scalar(a, "address"); ok {
			if addr, err := parseAddress(s); err != nil {
				l.errorf(a.pos, "contract %s: %v", c.Name, err)
			} else {
				c.Address = addr
			}
		}
	}
	if sb := m["start_block"]; !sb.isNull() {
		if v, ok := l.integer(sb, "start_block", 0, math.MaxInt64); ok {
			c.StartBlock = uint64(v)
		}
	}
	l.contractToken(m["token"], c)
	l.p.Contracts = append(l.p.Contracts, c)
}

// parseAddress checks a 0x-hex address, including its EIP-55 checksum
// when it is written in mixed case.
func parseAddress(s string) (common.Address, error) {
	if !common.IsHexAddress(s) || !strings.HasPrefix(strings.ToLower(s), "0x") {
		return common.Address{}, fmt.Errorf("%q is not a 0x-prefixed 20-byte hex address", s)
	}
	a := common.HexToAddress(s)
	body := s[2:]
	if body != strings.ToLower(body) && body != strings.ToUpper(body) && a.Hex() != s {
		return common.Address{}, fmt.Errorf("address %s has a bad EIP-55 checksum (expected %s)", s, a.Hex())
	}
	return a, nil
}

// loadABI reads a plain ABI JSON array or a Foundry/Hardhat artifact (an
// object with an "abi" key).
func (l *loader) loadABI(pos Position, rel string) *abi.ABI {
	path := rel
	if !filepath.IsAbs(path) {
		path = filepath.Join(l.p.Dir, rel)
	}
	src, err := l.read(path)
	if err != nil {
		l.errorf(pos, "abi: %v", err)
		return nil
	}
	parsed, err := parseABI(src)
	if err != nil {
		l.errorf(pos, "abi %s: %v", rel, err)
		return nil
	}
	return parsed
}

func parseABI(src []byte) (a *abi.ABI, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, fmt.Errorf("invalid ABI (%v)", r)
		}
	}()
	trimmed := bytes.TrimSpace(src)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var artifact struct {
			ABI json.RawMessage `json:"abi"`
		}
		if err := json.Unmarshal(trimmed, &artifact); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if len(artifact.ABI) == 0 {
			return nil, errors.New(`artifact has no "abi" key`)
		}
		trimmed = artifact.ABI
	}
	parsed, err := abi.JSON(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("invalid ABI: %w", err)
	}
	return &parsed, nil
}

// ProjectName reads only the name of the project file at path (with ${VAR}
// substitution), without checking the rest: commands that need the name
// before a full load (the embedded database's data directory) use it.
func ProjectName(path string, lookupEnv func(string) (string, bool)) (string, error) {
	src, err := readFile(path)
	if err != nil {
		return "", err
	}
	docs, ds := parseYAML(path, src)
	if len(ds) > 0 {
		return "", ds
	}
	if len(docs) != 1 {
		return "", fmt.Errorf("%s: the project file must hold exactly one YAML document", path)
	}
	l := newLoader(lookupEnv)
	n := docs[0].get("name")
	if n.isNull() {
		return "", fmt.Errorf("%s: the project has no name", path)
	}
	name := l.str(n, "name")
	if len(l.all) > 0 {
		return "", l.all
	}
	return name, nil
}

// needNetwork explains why a network: key is required.
func needNetwork(networks int) string {
	if networks == 0 {
		return "network is required, and the project declares no networks"
	}
	return fmt.Sprintf("network is required when the project has %d networks", networks)
}
