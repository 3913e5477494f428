package workflow

// Notifier is a named destination the project pages when something needs a
// person (a circuit breaker trip): a plain webhook, a Slack or a Discord
// incoming-webhook URL.
type Notifier struct {
	Pos    Position
	Name   string
	Format string // NotifyWebhook | NotifySlack | NotifyDiscord
	// URL may hold a secret (a Slack webhook URL is one): redact it in
	// anything that leaves the process.
	URL string
}

// Notifier returns the notifier called name, or nil.
func (p *Project) Notifier(name string) *Notifier {
	for _, n := range p.Notifiers {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (p *Project) notifierNames() []string {
	out := make([]string, len(p.Notifiers))
	for i, n := range p.Notifiers {
		out[i] = n.Name
	}
	return out
}

// notifier reads one entry of the project's notifiers: list.
func (l *loader) notifier(n *node) {
	formats := []string{NotifyWebhook, NotifySlack, NotifyDiscord}
	m := l.fields(n, "notifier", append([]string{"name"}, formats...)...)
	if m == nil {
		return
	}
	no := &Notifier{Pos: n.pos}
	if nn := l.required(m, n, "name", "notifier"); nn != nil {
		no.Name = l.uniqueName(nn, "notifier", l.p.notifierNames())
	}
	var found []string
	for _, f := range formats {
		if !m[f].isNull() {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		l.errorf(n.pos, "notifier %s needs exactly one of webhook, slack or discord (a URL), found %d", no.Name, len(found))
	} else {
		no.Format = found[0]
		v := m[no.Format]
		// An unset ${VAR} is reported by subst (or tolerated by operator
		// commands, which page nobody).
		if s, ok := l.scalar(v, no.Format); ok && l.checkURL(v.pos, "notifier "+no.Name+" "+no.Format, s, "http", "https") {
			no.URL = s
		}
	}
	l.p.Notifiers = append(l.p.Notifiers, no)
}

// checkNotifierRefs reports circuit breakers naming a notifier the project
// does not declare. It runs on the project file only: a stored spec
// compiled later (CompileSpec) is checked against the notifiers of the
// process that runs it when it pages.
func (l *loader) checkNotifierRefs() {
	for _, w := range l.p.Workflows {
		cb := w.CircuitBreaker
		if cb == nil || cb.Notify == "" || l.p.Notifier(cb.Notify) != nil {
			continue
		}
		hint := suggest(cb.Notify, l.p.notifierNames())
		if len(l.p.Notifiers) == 0 {
			hint = " (declare it under the project's notifiers:)"
		}
		l.errorf(cb.NotifyPos, "circuit_breaker notify: unknown notifier %q%s", cb.Notify, hint)
	}
}
