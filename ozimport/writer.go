package ozimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rflow-dev/rflow/workflow"
)

type outFile struct {
	path string // relative, slash-separated
	body []byte
}

// writeFiles writes files under dir, which must be empty or new unless
// force, and returns the paths written.
func writeFiles(dir string, files []outFile, force bool) ([]string, error) {
	if !force {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("output directory: %w", err)
		}
		if len(entries) > 0 {
			return nil, fmt.Errorf("output directory %s is not empty: choose a new one (-o DIR), or pass --force to write there, replacing files of the same names", dir)
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	var written []string
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		fh, err := os.OpenFile(p, flags, 0o644)
		if err != nil {
			return written, fmt.Errorf("create %s: %w", p, err)
		}
		_, werr := fh.Write(f.body)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return written, fmt.Errorf("write %s: %w", p, werr)
		}
		written = append(written, f.path)
	}
	return written, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ValidationError is an imported project that rflow validate would
// reject: a bug in the importer, reported with the validator's messages.
type ValidationError struct {
	Diagnostics workflow.Diagnostics
}

func (e *ValidationError) Error() string {
	lines := make([]string, 0, len(e.Diagnostics))
	for _, d := range e.Diagnostics {
		lines = append(lines, d.String())
	}
	return "the imported project does not validate (please report this):\n" + strings.Join(lines, "\n")
}

// validate loads the written project as rflow validate does, with a
// stand-in value for each variable it reads (the real ones are the
// operator's to set), and also checks the workflows of paused monitors,
// which rflow.yaml does not include.
func validate(dir string, r *Result) error {
	stand := map[string]string{}
	for _, e := range r.Env {
		stand[e.Name] = standIn(e)
	}
	lookup := func(name string) (string, bool) {
		if v, ok := stand[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
	p, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{LookupEnv: lookup})
	var ds workflow.Diagnostics
	if errors.As(err, &ds) {
		return &ValidationError{Diagnostics: ds}
	}
	if err != nil {
		return fmt.Errorf("validate the imported project: %w", err)
	}
	for _, w := range r.Workflows {
		if !w.Paused {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, w.File))
		if err != nil {
			return err
		}
		if _, err := workflow.ParseWorkflow(p, w.File, body); err != nil {
			if errors.As(err, &ds) {
				return &ValidationError{Diagnostics: ds}
			}
			return fmt.Errorf("validate %s: %w", w.File, err)
		}
	}
	return nil
}

// standIn is a value of the right shape for a variable the project reads.
func standIn(e EnvVar) string {
	switch {
	case strings.HasPrefix(e.Name, "START_BLOCK_"):
		return "0"
	case e.URL:
		return "https://example.invalid/"
	}
	return "stand-in"
}
