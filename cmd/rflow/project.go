package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/workflow"
)

func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "rflow.yaml", Usage: "project file"}
}

// projectName reads just the name: of the project file, when there is one
// (with ${VAR} substitution, as the full loader does); it keys the embedded
// database's data directory.
func projectName(c *cli.Context) string {
	name, err := workflow.ProjectName(c.String("config"), nil)
	if err != nil || name == "" {
		return "default"
	}
	return name
}
