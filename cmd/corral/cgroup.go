package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// cgroupMemoryLimit returns the memory limit of the cgroup this process runs in — the
// tightest of its own and its ancestors', under cgroup v2 (memory.max) and v1
// (memory.limit_in_bytes) alike — and whether there is one. fsys is the machine's root
// ("/"); cgroups are read where systemd, Docker and the kubelet mount them, under
// /sys/fs/cgroup. A v1 limit of 2^62 or more is v1's way of saying none.
func cgroupMemoryLimit(fsys fs.FS) (int64, bool) {
	raw, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	limit, found := int64(0), false
	take := func(v int64) {
		if v > 0 && (!found || v < limit) {
			limit, found = v, true
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2, the unified hierarchy
			take(walkUp(fsys, "sys/fs/cgroup", parts[2], "memory.max"))
		case hasController(parts[1], "memory"): // v1
			take(walkUp(fsys, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
		}
	}
	return limit, found
}

// walkUp returns the smallest limit in file of dir and its ancestors up to the mount's root,
// 0 for none. A container's own cgroup is often the root of what it sees mounted, while
// /proc/self/cgroup names the path on the host: a path missing under the mount is skipped,
// and its root still read.
func walkUp(fsys fs.FS, mount, dir, file string) int64 {
	var limit int64
	for p := path.Clean(dir); ; p = path.Dir(p) {
		if v := readLimit(fsys, path.Join(mount, p, file)); v > 0 && (limit == 0 || v < limit) {
			limit = v
		}
		if p == "/" {
			return limit
		}
	}
}

// readLimit reads a limit file: a byte count, or "max" (v2's none), 0 when there is none.
func readLimit(fsys fs.FS, name string) int64 {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0 // "max", or v1's page-rounded 2^63-1
	}
	return v
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
