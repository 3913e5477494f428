// Package migrations holds rflow's versioned SQL. Files are named
// NNN_description.sql and applied in order by store.Migrate, each in its own
// transaction, after River's own migrations.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
