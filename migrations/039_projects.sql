-- Projects that share a database are namespaces (store/namespace.go): one
-- row per project that ever started (or deployed, or migrated) here. The
-- home project (prefix '') keeps bare workflow names, River's default queue
-- and so every row a single-project database already has; any other
-- project P stores its workflow W as 'P.W' and works a River queue of its
-- own. The first project to register becomes the home project (the UNIQUE
-- prefix makes that race-safe).
CREATE TABLE rflow.projects (
    name          text        PRIMARY KEY,
    prefix        text        NOT NULL UNIQUE,
    queue         text        NOT NULL UNIQUE,
    registered_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projects_prefix CHECK (prefix = '' OR prefix = name || '.')
);

-- An upgraded database already holds the bare rows of some project: record
-- it as the home project when the database says which one it was, so that
-- another project starting first cannot adopt (and then retire) them. The
-- evidence is the project of a process still registered (rflow.nodes; ''
-- is a node of a version that did not record it) and the project prefix of
-- the trigger leases ('P/head/…', 'P/node/…'; an unnamed project's have no
-- prefix). With no evidence, or evidence of several projects, nothing is
-- seeded and store.RegisterProject decides at the first start.
WITH seen AS (
    SELECT project FROM rflow.nodes WHERE project <> ''
    UNION
    SELECT substring(name FROM '^([A-Za-z][A-Za-z0-9_-]*)/(head|node)/') FROM rflow.leases
    WHERE name ~ '^[A-Za-z][A-Za-z0-9_-]*/(head|node)/'
    UNION
    SELECT '' FROM rflow.leases WHERE name ~ '^(head|node)/'
)
INSERT INTO rflow.projects (name, prefix, queue)
SELECT project, '', 'default' FROM seen
WHERE (SELECT count(*) FROM seen) = 1;
