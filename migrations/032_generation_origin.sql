-- A generation deployed through PUT /v1/workflows/{name} is untrusted: the
-- engine compiles it so that its ${VAR} references read only the project's
-- env: allowlist (workflow.OriginAPI). Generations recorded before this
-- migration are marked from the deploy commands that created them, so an
-- API deploy made before the upgrade is held to the same rule.
ALTER TABLE rflow.workflow_generations ADD COLUMN from_api boolean NOT NULL DEFAULT false;

UPDATE rflow.workflow_generations g SET from_api = true
FROM rflow.workflow_deploys d
WHERE d.workflow_name = g.workflow_name AND d.generation = g.generation AND d.changed;
