package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// A backticked path inside the repository: it starts with one of the
	// repository's top-level directories.
	mdCodePath = regexp.MustCompile("`((?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.*-]*)`")
	// cmd/rflow.TestCrashAtEachFaultPoint/after-claim names a test, not a file.
	goTestName = regexp.MustCompile(`\.(Test|Fuzz|Example|Benchmark)`)
)

// TestDocsCiteFilesThatExist checks every relative link and every
// backticked repository path (`jobs/step_http.go`, `testdata/contracts/`) in
// README.md, docs/*.md and the examples' READMEs against the tree: docs
// that cite a file name a file a reader can open.
func TestDocsCiteFilesThatExist(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			top[e.Name()] = true
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	examples, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	require.NoError(t, err)
	docs = append(append(docs, filepath.Join(root, "README.md")), examples...)
	require.Greater(t, len(docs), 5)

	exists := func(p string) bool {
		if strings.Contains(p, "*") {
			m, _ := filepath.Glob(p)
			return len(m) > 0
		}
		_, err := os.Stat(p)
		return err == nil
	}
	var missing []string
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, doc)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if !exists(filepath.Join(filepath.Dir(doc), target)) {
					missing = append(missing, rel+":"+itoa(i+1)+": link "+m[1])
				}
			}
			for _, m := range mdCodePath.FindAllStringSubmatch(line, -1) {
				p := m[1]
				if !top[strings.SplitN(p, "/", 2)[0]] || strings.Contains(p, "...") || goTestName.MatchString(p) {
					continue
				}
				// "each package's testdata/fuzz" names a path inside packages.
				if !exists(filepath.Join(root, p)) && !exists(filepath.Join(root, "*", p)) {
					missing = append(missing, rel+":"+itoa(i+1)+": path `"+p+"`")
				}
			}
		}
	}
	require.Empty(t, missing, "the docs cite files that do not exist")
}

func itoa(i int) string { return strconv.Itoa(i) }
