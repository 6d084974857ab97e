package main

import "github.com/alecthomas/kingpin/v2"

// kingpinCmd is a command of the kingpin model, flattened for the reference.
type kingpinCmd struct {
	name, help, path string
	args             []string
	flags            [][3]string // name, default, help
	sub              []*kingpinCmd
}

func commandsOf(cs []*kingpin.CmdModel) []*kingpinCmd {
	var out []*kingpinCmd
	for _, c := range cs {
		if c.Hidden || c.Name == "help" {
			continue
		}
		k := &kingpinCmd{name: c.Name, help: c.Help, path: c.FullCommand}
		for _, a := range c.Args {
			k.args = append(k.args, a.Name)
		}
		for _, f := range c.Flags {
			def := ""
			if len(f.Default) > 0 {
				def = f.Default[0]
			}
			k.flags = append(k.flags, [3]string{f.Name, def, f.Help})
		}
		k.sub = commandsOf(c.Commands)
		out = append(out, k)
	}
	return out
}
