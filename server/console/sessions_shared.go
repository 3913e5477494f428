package console

import "time"

// Sessions is a console's table of logins. Consoles built one after the
// other in one process can share one (Config.Sessions), so a login
// outlives the console it was made on: rflow dev builds a new server for
// each generation of the project it reloads, and a save logs nobody out.
type Sessions = sessions

// NewSessions makes a table of logins that last ttl (12h when ttl <= 0).
func NewSessions(ttl time.Duration) *Sessions {
	if ttl <= 0 {
		ttl = defaultSessionTTL
	}
	return newSessions(ttl)
}

// defaultSessionTTL is how long a login lasts unless configured.
const defaultSessionTTL = 12 * time.Hour
