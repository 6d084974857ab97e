package mapping

// Config is the exporter's mapping section (mapping.*): its YAML keys and flags, with help.
type Config struct {
	RulesFile string `yaml:"rules_file" help:"YAML file of extra metric mapping rules (at most 1 MiB)."`
}
