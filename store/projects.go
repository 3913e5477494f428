package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// projectEvidence lists the projects the database shows signs of having
// run: a registered process's project and the project prefix of the
// trigger leases (see migration 039, which seeds the home project from the
// same query).
const projectEvidence = `
	SELECT project FROM rflow.nodes WHERE project <> ''
	UNION
	SELECT substring(name FROM '^([A-Za-z][A-Za-z0-9_-]*)/(head|node)/') FROM rflow.leases
	WHERE name ~ '^[A-Za-z][A-Za-z0-9_-]*/(head|node)/'
	UNION
	SELECT '' FROM rflow.leases WHERE name ~ '^(head|node)/'`

// RegisterProject records project in rflow.projects, unless it is there,
// and returns its namespace. The first project to register becomes the
// home project, with one exception that protects an upgraded database:
// when the database already holds bare (home) workflows and shows signs of
// other projects only (projectEvidence), this project does not adopt them
// and registers as a project of its own. Concurrent registrations are
// settled by the table's UNIQUE constraints. An unnamed project can only be
// the home project.
func RegisterProject(ctx context.Context, db DBTX, project string) (Namespace, error) {
	if ns, ok, err := registeredNamespace(ctx, db, project); err != nil || ok {
		return ns, err
	}
	var mayBeHome bool
	err := db.QueryRow(ctx, `
		WITH seen AS (`+projectEvidence+`)
		SELECT NOT EXISTS (SELECT 1 FROM rflow.workflows w WHERE `+HomeNamespace("").filter("w.name")+`)
		    OR NOT EXISTS (SELECT 1 FROM seen)
		    OR EXISTS (SELECT 1 FROM seen WHERE project = $1)`, project).Scan(&mayBeHome)
	if err != nil {
		return Namespace{}, fmt.Errorf("register project %q: %w", project, err)
	}
	if mayBeHome {
		if _, err := db.Exec(ctx, `
			INSERT INTO rflow.projects (name, prefix, queue) VALUES ($1, '', 'default')
			ON CONFLICT DO NOTHING`, project); err != nil {
			return Namespace{}, fmt.Errorf("register project %q: %w", project, err)
		}
		if ns, ok, err := registeredNamespace(ctx, db, project); err != nil || ok {
			return ns, err
		}
	}
	home, _, err := HomeProject(ctx, db)
	if err != nil {
		return Namespace{}, err
	}
	if project == "" {
		return Namespace{}, fmt.Errorf("this project has no name:, and the database already belongs to project %q: "+
			"an unnamed project cannot share it; give rflow.yaml a name:", home)
	}
	if err := ValidProjectName(project); err != nil {
		return Namespace{}, err
	}
	ns := projectNamespace(project)
	if _, err := db.Exec(ctx, `
		INSERT INTO rflow.projects (name, prefix, queue) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, project, ns.prefix, ns.Queue()); err != nil {
		return Namespace{}, fmt.Errorf("register project %q: %w", project, err)
	}
	if ns, ok, err := registeredNamespace(ctx, db, project); err != nil || ok {
		return ns, err
	}
	return Namespace{}, fmt.Errorf("register project %q: its River queue %s is another project's: rename the project", project, ns.Queue())
}

// LookupNamespace is project's namespace without registering it (for the
// commands that only read): the registered one, else the one it would get
// if it started now. A database migrated before projects existed is all
// home.
func LookupNamespace(ctx context.Context, db DBTX, project string) (Namespace, error) {
	ns, ok, err := registeredNamespace(ctx, db, project)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: not migrated to 039 yet
		return HomeNamespace(project), nil
	}
	if err != nil || ok {
		return ns, err
	}
	_, homeTaken, err := HomeProject(ctx, db)
	if err != nil || !homeTaken || project == "" {
		return HomeNamespace(project), err
	}
	if err := ValidProjectName(project); err != nil {
		return Namespace{}, err
	}
	return projectNamespace(project), nil
}

// HomeProject is the name of the database's home project, and whether it
// has one yet.
func HomeProject(ctx context.Context, db DBTX) (string, bool, error) {
	var name string
	err := db.QueryRow(ctx, `SELECT name FROM rflow.projects WHERE prefix = ''`).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("home project: %w", err)
	}
	return name, true, nil
}

// ProjectNames maps a stored workflow name to its project's name and its
// local name, for listings of every project (runs list --all-projects).
type ProjectNames struct{ home string }

// LoadProjectNames reads what ProjectNames needs.
func LoadProjectNames(ctx context.Context, db DBTX) (ProjectNames, error) {
	home, _, err := HomeProject(ctx, db)
	return ProjectNames{home: home}, err
}

// Split is the project and local name of a stored workflow name.
func (p ProjectNames) Split(stored string) (project, local string) {
	project, local = ProjectOf(stored)
	if project == "" {
		project = p.home
	}
	return project, local
}

// qualifiedEverywhere is local's stored name in every registered project
// (the bare name alone on a database without rflow.projects rows).
func qualifiedEverywhere(ctx context.Context, db DBTX, local string) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT prefix || $1 FROM rflow.projects ORDER BY 1`, local)
	if err != nil {
		return nil, fmt.Errorf("workflow %s in every project: %w", local, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("workflow %s in every project: %w", local, err)
	}
	if len(names) == 0 {
		names = []string{local}
	}
	return names, nil
}

func registeredNamespace(ctx context.Context, db DBTX, project string) (Namespace, bool, error) {
	var prefix string
	err := db.QueryRow(ctx, `SELECT prefix FROM rflow.projects WHERE name = $1`, project).Scan(&prefix)
	if errors.Is(err, pgx.ErrNoRows) {
		return Namespace{}, false, nil
	}
	if err != nil {
		return Namespace{}, false, fmt.Errorf("project %q: %w", project, err)
	}
	if prefix == "" {
		return HomeNamespace(project), true, nil
	}
	return projectNamespace(project), true, nil
}
