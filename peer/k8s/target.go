package k8s

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// serviceAccountNamespace is where a pod's service account namespace is mounted.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// parseTarget splits "namespace/service[:port]" or "service[:port]"; an empty namespace means
// this pod's own (see podNamespace). Its errors do not repeat the target: package peer names the
// seed.
func parseTarget(target string) (Config, error) {
	var c Config
	rest := target
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		rest, c.Port = rest[:i], rest[i+1:]
		if c.Port == "" {
			return c, errors.New("empty port")
		}
	}
	ns, svc, ok := strings.Cut(rest, "/")
	if !ok {
		ns, svc = "", rest
	}
	c.Namespace, c.Service = ns, svc
	if ok && ns == "" {
		return c, errors.New("empty namespace (write k8s://service for this pod's namespace)")
	}
	return c, c.checkNames()
}

// checkNames checks Namespace, Service and Port as the API server would.
func (c Config) checkNames() error {
	var errs []error
	if c.Service == "" {
		errs = append(errs, errors.New("a service name is required"))
	} else if msgs := validation.IsDNS1035Label(c.Service); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("service %q: %s", c.Service, strings.Join(msgs, "; ")))
	}
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace %q: %s", c.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if c.Port != "" {
		if n, err := strconv.Atoi(c.Port); err == nil {
			if n < 1 || n > 65535 {
				errs = append(errs, fmt.Errorf("port %d is not in 1-65535", n))
			}
		} else if msgs := validation.IsValidPortName(c.Port); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("port name %q: %s", c.Port, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// podNamespace is the namespace of the pod this runs in: POD_NAMESPACE (the Downward API), else
// the service account's namespace file.
func podNamespace() (string, error) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return "", errors.New("no namespace given, POD_NAMESPACE is not set and this is not a pod with a service account (set POD_NAMESPACE from the Downward API, or write k8s://namespace/service)")
	}
	return strings.TrimSpace(string(b)), nil
}
