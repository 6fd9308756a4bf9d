module github.com/corralcache/corral/e2e/faults

go 1.26.0
