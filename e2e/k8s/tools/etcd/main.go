// Command etcd is etcd's server, built here so the Kubernetes tests need no download but Go
// modules. It is what go.etcd.io/etcd/v3's own main does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
