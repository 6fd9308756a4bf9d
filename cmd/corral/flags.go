package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// listFlag is a repeatable string flag; from the environment it takes a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// envName is the environment variable of a flag: CORRAL_ and the name upper-cased, with -
// as _ (--gossip-port → CORRAL_GOSSIP_PORT).
func envName(flagName string) string {
	return "CORRAL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag that was not given on the command line from its environment
// variable, if that is set. lookup is os.LookupEnv outside tests.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %s", envName(f.Name), v, wants(f, e))
			}
		}
	})
	return err
}

// firstEnv returns the first of the variables that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// parseArgs parses args with fs. -h or --help prints fs's usage on stdout and returns
// flag.ErrHelp (the command then exits 0). A bad flag or value is returned as an error that
// names the flag and says what it takes — "--ttl \"30\": not a duration: a number with a unit,
// such as 30s, 5m or 1h30m" rather than flag's bare "parse error" — without the whole usage,
// which would bury it.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return fmt.Errorf("%s (corral %s -h lists the flags)", explainFlagError(fs, err), fs.Name())
	}
	return nil
}

// explainFlagError rewrites flag's "invalid value \"30\" for flag -ttl: parse error" as
// "--ttl \"30\": not a duration: …"; other errors it returns as they are.
func explainFlagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return msg
	}
	i := strings.LastIndex(rest, " for flag -")
	if i < 0 {
		return msg
	}
	name, cause, _ := strings.Cut(rest[i+len(" for flag -"):], ": ")
	bad := fs.Lookup(name)
	if bad == nil {
		return msg
	}
	v, uerr := strconv.Unquote(rest[:i])
	if uerr != nil {
		v = rest[:i]
	}
	return fmt.Sprintf("--%s %q: %s", bad.Name, v, wants(bad, errors.New(cause)))
}

// wants says what f takes, for an error of setting it: "not a duration: …" for a duration
// flag, and so on; err's own words for a flag of another kind.
func wants(f *flag.Flag, err error) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	if strings.Contains(err.Error(), "out of range") {
		return "out of range"
	}
	switch g.Get().(type) {
	case time.Duration:
		return "not a duration: a number with a unit, such as 30s, 5m or 1h30m"
	case int, int64, uint, uint64:
		return "not an integer"
	case float64:
		return "not a number"
	case bool:
		return "not true or false"
	}
	return err.Error()
}
