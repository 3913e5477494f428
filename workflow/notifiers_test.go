package workflow

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadNotifiers(t *testing.T, src string) (*Project, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return Load(path, LoadOptions{LookupEnv: lookup(map[string]string{"SLACK_URL": "https://hooks.slack.example/T0/B0/secret"})})
}

const breakerWorkflow = `workflows:
  - name: w
    trigger: { manual: {} }
    circuit_breaker: { failures: 2, window: 5m, notify: %s }
    steps: [{ id: a, noop: {} }]
`

func TestNotifiers(t *testing.T) {
	t.Parallel()
	p, err := loadNotifiers(t, "name: t\nnotifiers:\n  - { name: pager, slack: \"${SLACK_URL}\" }\n  - { name: ops, discord: https://discord.example/api/webhooks/1/x }\n"+
		"workflows:\n  - name: w\n    trigger: { manual: {} }\n    circuit_breaker: { failures: 2, window: 5m, notify: pager }\n    steps: [{ id: a, noop: {} }]\n")
	require.NoError(t, err)
	require.Len(t, p.Notifiers, 2)
	require.Equal(t, NotifySlack, p.Notifier("pager").Format)
	require.Equal(t, "https://hooks.slack.example/T0/B0/secret", p.Notifier("pager").URL)
	require.Equal(t, NotifyDiscord, p.Notifier("ops").Format)
	require.Equal(t, "pager", p.Workflows[0].CircuitBreaker.Notify)

	cases := []struct{ name, src, want string }{
		{"duplicate", "name: t\nnotifiers:\n  - { name: pager, webhook: https://a.example }\n  - { name: pager, webhook: https://b.example }\n",
			"rflow.yaml:4:13: duplicate notifier name \"pager\""},
		{"no destination", "name: t\nnotifiers:\n  - { name: pager }\n",
			"rflow.yaml:3:5: notifier pager needs exactly one of webhook, slack or discord (a URL), found 0"},
		{"two destinations", "name: t\nnotifiers:\n  - { name: pager, webhook: https://a.example, slack: https://b.example }\n",
			"rflow.yaml:3:5: notifier pager needs exactly one of webhook, slack or discord (a URL), found 2"},
		{"not a URL", "name: t\nnotifiers:\n  - { name: pager, webhook: \"ftp://hooks.example/x?token=hunter2\" }\n",
			"rflow.yaml:3:29: notifier pager webhook"},
		{"unknown key", "name: t\nnotifiers:\n  - { name: pager, webhok: https://a.example }\n",
			"rflow.yaml:3:20: unknown key \"webhok\" in notifier; did you mean webhook?"},
		{"unknown notifier", "name: t\nnotifiers:\n  - { name: pager, webhook: https://a.example }\n" + fmtBreaker("pagr"),
			"rflow.yaml:7:57: circuit_breaker notify: unknown notifier \"pagr\"; did you mean pager?"},
		{"no notifiers", "name: t\n" + fmtBreaker("pager"),
			"rflow.yaml:5:57: circuit_breaker notify: unknown notifier \"pager\" (declare it under the project's notifiers:)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadNotifiers(t, c.src)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "hunter2", "a URL's secrets never reach a message")
		})
	}
}

func fmtBreaker(notify string) string {
	return fmt.Sprintf(breakerWorkflow, notify)
}
