package node

// What the node changes on this host, and how every change is undone: by the test binary when
// it ends normally, by the reaper (a process of its own that outlives the test binary) when the
// binary dies any other way — a failed or panicking test, SIGINT or SIGTERM, its -timeout — and
// by the next run's sweep when even the reaper was killed.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's fixed names and addresses. One node per host: the kubelet uses some host paths
// whatever its configuration (hostPaths below), so two nodes could not share a host anyway; a
// lock (lockNode) makes a second run wait for the first.
const (
	nodeName    = "corral-e2e"
	bridgeName  = "corral-e2e0"
	podCIDR     = "10.244.77.0/24"
	bridgeIP    = "10.244.77.1" // the node's IP: the API server, the kubelet and CoreDNS listen here
	serviceCIDR = "10.96.77.0/24"
	kubeSvcIP   = "10.96.77.1" // the kubernetes Service, which kube-proxy maps to the API server
	cgroupRoot  = "corral-e2e" // every pod's cgroup is below /sys/fs/cgroup/<controller>/corral-e2e
	reaperEnv   = "CORRAL_E2E_NODE_REAPER"
)

// workDir holds everything of the node that can live under one directory: certificates,
// configurations, etcd's data, containerd's root and state, the kubelet's root, logs.
var workDir = filepath.Join(os.TempDir(), "corral-e2e-node")

// hostPaths are paths outside workDir that the kubelet and containerd use whatever their
// configuration. Those that did not exist before the node started are removed after it.
var hostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd", "/run/kubernetes"}

// sysctlTrees are the /proc/sys trees whose writable values are read before the node starts
// and written back after it when they changed: the kubelet sets vm.overcommit_memory,
// kernel.panic, kernel.panic_on_oops and kernel.keys.*, kube-proxy could set conntrack and
// route_localnet values (its configuration asks it not to).
var sysctlTrees = []string{"kernel", "vm", "net/core", "net/bridge", "net/netfilter", "net/ipv4", "net/ipv6/conf/all", "net/ipv6/conf/default"}

// sysctlSkip are values that move by themselves, or that writing back would be wrong for.
var sysctlSkip = []string{"kernel/ns_last_pid", "kernel/random/", "kernel/perf_", "kernel/tainted", "vm/drop_caches",
	"vm/compact_memory", "net/ipv4/conf/", "net/ipv4/neigh/", "kernel/hostname", "kernel/domainname"}

// hostState is written to workDir/host.json before each change it records, so that whoever
// undoes the node (this process, the reaper, the next run) knows what to undo.
type hostState struct {
	Started time.Time
	Tools   string              // the tools' directory: kube-proxy --cleanup
	Sysctls map[string]string   // /proc/sys path → value before the node started
	Created []string            // hostPaths that did not exist before
	Forward bool                // the FORWARD rule that lets pods reach each other is in place
	Procs   []procRecord        // started processes, oldest first
	Socket  string              // containerd's socket: its shims name it on their command line
	Kube    map[string][]string // "iptables", "ip6tables" → their KUBE- chains and rules before
}

type procRecord struct {
	Name string
	Pid  int
	Exe  string
}

func statePath() string { return filepath.Join(workDir, "host.json") }

func (s *hostState) save() error {
	b, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return err
	}
	tmp := statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath())
}

func loadState() (*hostState, error) {
	b, err := os.ReadFile(statePath())
	if err != nil {
		return nil, err
	}
	var s hostState
	return &s, json.Unmarshal(b, &s)
}

// recordHost reads what undo will restore, before anything changes.
func recordHost(tools string) (*hostState, error) {
	s := &hostState{Started: time.Now(), Tools: tools, Sysctls: map[string]string{}}
	for _, tree := range sysctlTrees {
		root := filepath.Join("/proc/sys", tree)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel := strings.TrimPrefix(p, "/proc/sys/")
			if slices.ContainsFunc(sysctlSkip, func(s string) bool { return strings.HasPrefix(rel, s) }) {
				return nil
			}
			if info, err := d.Info(); err != nil || info.Mode().Perm()&0o200 == 0 {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				s.Sysctls[p] = strings.TrimSpace(string(b))
			}
			return nil
		})
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			s.Created = append(s.Created, p)
		}
	}
	s.Kube = map[string][]string{}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		s.Kube[cmd] = kubeRules(cmd)
	}
	return s, s.save()
}

// kubeRules lists the KUBE- chains and the rules that name one, of every table, as
// "table chain-or-rule" lines of iptables-save.
func kubeRules(cmd string) []string {
	out, _ := exec.Command(cmd + "-save").Output()
	var lines []string
	table := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":KUBE-"), strings.HasPrefix(l, "-A") && strings.Contains(l, "KUBE-"):
			lines = append(lines, table+" "+l)
		}
	}
	return lines
}

// removeKubeRules removes the KUBE- rules and chains that were not there before: kube-proxy
// --cleanup removes its own, and this catches the kubelet's (KUBE-FIREWALL, jumped to from
// INPUT and OUTPUT, in iptables and ip6tables) and whatever a later version adds.
func removeKubeRules(cmd string, before []string) {
	var chains [][2]string
	for _, l := range kubeRules(cmd) {
		if slices.Contains(before, l) {
			continue
		}
		table, rule, _ := strings.Cut(l, " ")
		if name, ok := strings.CutPrefix(rule, ":"); ok {
			chains = append(chains, [2]string{table, strings.Fields(name)[0]})
			continue
		}
		args := append([]string{"-t", table, "-D"}, splitRule(strings.TrimPrefix(rule, "-A "))...)
		if out, err := exec.Command(cmd, args...).CombinedOutput(); err != nil {
			logf("undo: %s %s: %v: %s", cmd, strings.Join(args, " "), err, out)
		}
	}
	for _, c := range chains {
		exec.Command(cmd, "-t", c[0], "-F", c[1]).Run()
		if out, err := exec.Command(cmd, "-t", c[0], "-X", c[1]).CombinedOutput(); err != nil {
			logf("undo: %s -t %s -X %s: %v: %s", cmd, c[0], c[1], err, out)
		}
	}
}

// splitRule splits a rule of iptables-save into arguments (double quotes group words).
func splitRule(s string) []string {
	var args []string
	var cur strings.Builder
	quoted, started := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case r == ' ' && !quoted:
			if started {
				args = append(args, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		args = append(args, cur.String())
	}
	return args
}

// logf is where undo reports what it does: the test's stderr, or the reaper's log.
var logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "node: "+format+"\n", args...) }

// undo takes the node down and restores the host, whatever state it was left in; it never
// stops at an error (each step is reported and the next one runs). Safe to run again.
func undo() {
	s, err := loadState()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logf("undo: %v (going on without it)", err)
		}
		s = &hostState{}
	}
	start := time.Now()
	// 1. The processes, newest first (the kubelet before the runtime it drives), then the
	// runtime's shims and every process left in the pods' cgroups.
	for i := len(s.Procs) - 1; i >= 0; i-- {
		killRecorded(s.Procs[i])
	}
	if s.Socket != "" {
		killShims(s.Socket)
	}
	killCgroupProcs()
	// 2. Mounts under workDir (volumes, network namespaces, root filesystems), deepest first.
	unmountUnder(workDir)
	// 3. cgroups, deepest first.
	removeCgroups()
	// 4. Network: kube-proxy's rules, our FORWARD rule, the bridge (its routes go with it).
	if s.Tools != "" {
		if out, err := exec.Command(filepath.Join(s.Tools, "kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
			logf("undo: kube-proxy --cleanup: %v: %s", err, lastLines(string(out), 5))
		}
	}
	for cmd, before := range s.Kube {
		removeKubeRules(cmd, before)
	}
	for exec.Command("iptables", forwardRule("-D")...).Run() == nil {
	}
	if err := exec.Command("ip", "link", "show", bridgeName).Run(); err == nil {
		if out, err := exec.Command("ip", "link", "del", bridgeName).CombinedOutput(); err != nil {
			logf("undo: ip link del %s: %v: %s", bridgeName, err, out)
		}
	}
	// 5. sysctls that changed.
	keys := make([]string, 0, len(s.Sysctls))
	for k := range s.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, p := range keys {
		b, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(b)) == s.Sysctls[p] {
			continue
		}
		if err := os.WriteFile(p, []byte(s.Sysctls[p]), 0o644); err != nil {
			logf("undo: restore %s to %q: %v", p, s.Sysctls[p], err)
		} else {
			logf("undo: restored %s from %q to %q", strings.TrimPrefix(p, "/proc/sys/"), strings.TrimSpace(string(b)), s.Sysctls[p])
		}
	}
	// 6. Host paths the node created. /run/containerd/s holds the shims' sockets of every
	// containerd, Docker's too: only sockets nobody answers on any more are removed.
	// Docker's shims use that directory too, so whether it existed before says little: it is
	// removed whenever it is empty.
	removeStaleShimSockets(s.Started)
	removeIfEmpty("/run/containerd/s")
	removeIfEmpty("/run/containerd/runc")
	removeIfEmpty("/run/containerd")
	for _, p := range s.Created {
		unmountUnder(p)
		if p == "/run/containerd" {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			logf("undo: remove %s: %v", p, err)
		}
	}
	// 7. workDir itself, unless something is still mounted in it.
	if len(mountsUnder(workDir)) == 0 {
		if err := os.RemoveAll(workDir); err != nil {
			logf("undo: remove %s: %v", workDir, err)
		}
	} else {
		logf("undo: %s keeps mounts, left in place: %v", workDir, mountsUnder(workDir))
	}
	logf("undo: host restored in %v", time.Since(start).Round(time.Millisecond))
}

// forwardRule is the iptables rule that lets pods reach each other across the bridge: Docker
// sets the FORWARD policy to DROP, and bridged traffic passes iptables on this kind of host.
func forwardRule(op string) []string {
	return []string{op, "FORWARD", "-i", bridgeName, "-o", bridgeName, "-j", "ACCEPT", "-m", "comment", "--comment", "corral-e2e node"}
}

// killRecorded kills a recorded process if that pid still runs the recorded binary (a pid the
// kernel gave to another process since is left alone).
func killRecorded(p procRecord) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid))
	if err != nil || strings.TrimSuffix(exe, " (deleted)") != p.Exe {
		return
	}
	syscall.Kill(p.Pid, syscall.SIGKILL)
	waitGone(p.Pid, 10*time.Second)
}

func waitGone(pid int, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	logf("undo: pid %d still there after %v", pid, within)
}

// killShims kills the containerd shims started for socket (they name it in their -address).
func killShims(socket string) {
	for _, pid := range pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.Contains(args[0], "containerd-shim") && slices.Contains(args, socket) {
			syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 10*time.Second)
		}
	}
}

func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// cgroupDirs are the node's cgroups in every hierarchy, deepest first.
func cgroupDirs() []string {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupRoot)
	if _, err := os.Stat("/sys/fs/cgroup/" + cgroupRoot); err == nil {
		hier = append(hier, "/sys/fs/cgroup/"+cgroupRoot) // a pure cgroup v2 host
	}
	var dirs []string
	for _, h := range hier {
		filepath.WalkDir(h, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killCgroupProcs kills every process in the node's cgroups (the pods' containers, whose
// shims may be gone already) until none is left.
func killCgroupProcs() {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []int
		for _, d := range cgroupDirs() {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					left = append(left, pid)
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			logf("undo: processes still in the node's cgroups: %v", left)
			return
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func removeCgroups() {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		dirs := cgroupDirs()
		for _, d := range dirs {
			if e := syscall.Rmdir(d); e != nil && !errors.Is(e, syscall.ENOENT) {
				err = fmt.Errorf("%s: %w", d, e)
			}
		}
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				logf("undo: remove cgroup %v", err)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unmountUnder(dir string) {
	for range 10 { // a mount may hide another one at the same point
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				logf("undo: unmount %s: %v", mp, err)
			}
		}
	}
}

// removeStaleShimSockets removes the sockets in /run/containerd/s made since the node started
// that nobody answers on: the node's dead shims'. A live shim's socket (Docker's) answers.
func removeStaleShimSockets(since time.Time) {
	ents, _ := os.ReadDir("/run/containerd/s")
	for _, e := range ents {
		p := filepath.Join("/run/containerd/s", e.Name())
		info, err := e.Info()
		if err != nil || info.ModTime().Before(since) {
			continue
		}
		c, err := net.DialTimeout("unix", p, 200*time.Millisecond)
		if err == nil {
			c.Close()
			continue
		}
		os.Remove(p)
	}
}

func removeIfEmpty(p string) { syscall.Rmdir(p) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockNode takes the host's node lock, waiting up to within for another run to finish. The
// lock is an flock on a file: the kernel drops it when its last holder dies, so a crashed run
// never keeps it. The returned file holds it; the reaper inherits it.
func lockNode(within time.Duration) (*os.File, error) {
	f, err := os.OpenFile(workDir+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(within)
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			f.Truncate(0)
			fmt.Fprintf(f, "%d\n", os.Getpid())
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(workDir + ".lock")
			f.Close()
			return nil, fmt.Errorf("another run holds the node lock %s (pid %s) after %v", workDir+".lock", strings.TrimSpace(string(b)), within)
		}
		if !said {
			logf("waiting for another run's node to go (lock %s)", workDir+".lock")
			said = true
		}
		time.Sleep(time.Second)
	}
}

// startReaper starts this test binary again as the reaper: it holds the node lock, waits for
// this process to end (its standard input closes) and, unless told "done", undoes the node.
// It ignores SIGINT and SIGTERM and has a process group of its own, so the signal that ends a
// run does not end its cleanup. It logs to workDir.reaper.log.
func startReaper(lock *os.File) (done func(), err error) {
	logFile, err := os.OpenFile(workDir+".reaper.log", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), reaperEnv+"=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go cmd.Wait()
	return func() { io.WriteString(w, "done\n"); w.Close() }, nil
}

// reap is the reaper's whole life (see startReaper).
func reap() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s reaper: "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	b, _ := io.ReadAll(os.Stdin)
	if strings.TrimSpace(string(b)) == "done" {
		return
	}
	logf("the test binary ended without undoing the node: undoing it")
	undo()
}
