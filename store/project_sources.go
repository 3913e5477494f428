package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ProjectSource is a project's source files as last deployed, by path
// relative to the project file's directory (workflow.Project.Sources).
type ProjectSource struct {
	Project string
	// Main is the project file's path among Files.
	Main       string
	Files      map[string]string
	DeployedAt time.Time
}

// SaveProjectSources records files as project's sources, replacing what
// an earlier deploy recorded.
func SaveProjectSources(ctx context.Context, db DBTX, project, main string, files map[string]string) error {
	b, err := json.Marshal(files)
	if err != nil {
		return fmt.Errorf("project %s sources: %w", project, err)
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO rflow.project_sources (project, main, files) VALUES ($1, $2, $3)
		ON CONFLICT (project) DO UPDATE SET main = excluded.main, files = excluded.files, deployed_at = now()`,
		project, main, b); err != nil {
		return fmt.Errorf("save project %s sources: %w", project, err)
	}
	return nil
}

// ProjectSources lists the recorded sources of every project, by name.
func ProjectSources(ctx context.Context, db DBTX) ([]ProjectSource, error) {
	rows, err := db.Query(ctx, `SELECT project, main, files, deployed_at FROM rflow.project_sources ORDER BY project`)
	if err != nil {
		return nil, fmt.Errorf("project sources: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ProjectSource])
	if err != nil {
		return nil, fmt.Errorf("project sources: %w", err)
	}
	return out, nil
}
