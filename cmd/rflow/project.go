package main

import (
	"os"

	"github.com/goccy/go-yaml"
	"github.com/urfave/cli/v2"
)

func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "rflow.yaml", Usage: "project file"}
}

// projectName reads just the name: of the project file, when there is one;
// it keys the embedded database's data directory.
func projectName(c *cli.Context) string {
	b, err := os.ReadFile(c.String("config"))
	if err != nil {
		return "default"
	}
	var p struct {
		Name string `yaml:"name"`
	}
	if yaml.Unmarshal(b, &p) != nil || p.Name == "" {
		return "default"
	}
	return p.Name
}
