// Package quickstart embeds examples/quickstart, the project `rflow dev`
// runs, so the rflow binary carries it and works from any directory.
package quickstart

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files holds rflow.yaml, abis/ and workflows/ (not this Go file or the
// README).
//
//go:embed rflow.yaml abis workflows
var Files embed.FS

// Env names the variables the project reads with ${VAR}.
const (
	EnvRPC        = "RFLOW_DEV_RPC"         // the chain's HTTP JSON-RPC URL
	EnvChainID    = "RFLOW_DEV_CHAIN_ID"    // its chain id
	EnvContract   = "RFLOW_DEV_CONTRACT"    // the Emitter's address
	EnvStartBlock = "RFLOW_DEV_START_BLOCK" // where event ingestion starts
	EnvEndpoint   = "RFLOW_DEV_ENDPOINT"    // base URL serving /dev/echo and /dev/notify
	EnvWalletKey  = "RFLOW_DEV_WALLET_KEY"  // hex private key of the funded wallet the send step uses
)

// WriteTo writes the project into dir (created if needed) and returns the
// path of its rflow.yaml. Existing files are replaced.
func WriteTo(dir string) (string, error) {
	path, _, err := write(dir, true)
	return path, err
}

// WriteMissing writes the project's files that dir does not have yet and
// leaves the others as they are: `rflow dev` keeps its copy of the
// quickstart in a folder that outlives the session, and your edits with
// it. It returns the path of rflow.yaml and how many files it wrote.
func WriteMissing(dir string) (path string, written int, err error) {
	return write(dir, false)
}

func write(dir string, replace bool) (string, int, error) {
	written := 0
	err := fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if _, err := os.Lstat(target); err == nil && !replace {
			return nil
		}
		b, err := Files.ReadFile(path)
		if err != nil {
			return err
		}
		written++
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		return "", written, fmt.Errorf("write the quickstart project to %s: %w", dir, err)
	}
	return filepath.Join(dir, "rflow.yaml"), written, nil
}
