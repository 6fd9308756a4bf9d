package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuLimit is a CPU cgroup that holds some of the test's processes to a quota: the cgroup v1
// cpu controller's cpu.cfs_quota_us, or cgroup v2's cpu.max. It is named for the test
// process (cgroupPrefix + pid + "-" + name), so that a later run removes what a killed run
// left (sweepCPULimits).
type cpuLimit struct {
	dir   string         // the cgroup's directory
	root  string         // the hierarchy's root, where a cgroup's processes are put back
	procs string         // the file a process is moved in by writing its pid
	back  map[int]string // each process moved in, and the cgroup directory it came from
}

const cgroupPrefix = "corral-e2e-starve-"

// cpuHierarchy returns the root of a cgroup hierarchy whose cpu controller this process may
// use, and whether it is cgroup v2; "" when there is none (no cgroups, not root).
func cpuHierarchy() (string, bool) {
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		return "/sys/fs/cgroup/cpu", false
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(" "+string(b)+" ", " cpu ") {
		return "/sys/fs/cgroup", true
	}
	return "", false
}

// newCPULimit makes a cgroup whose processes share cpus CPUs (0.2: a fifth of one), granted
// every period (at most a second: the processes stand still for the rest of it once they have
// used their share), and removes it at cleanup, after putting its processes back where they were. It skips the test
// when this machine offers no cgroup this process may write (it fails instead when CI is set).
func newCPULimit(tb testing.TB, name string, cpus float64, period time.Duration) *cpuLimit {
	tb.Helper()
	root, v2 := cpuHierarchy()
	if root == "" {
		skipOrFail(tb, "no cgroup cpu controller is mounted")
	}
	sweepCPULimits(root)
	l := &cpuLimit{dir: filepath.Join(root, cgroupPrefix+strconv.Itoa(os.Getpid())+"-"+name), root: root, back: map[int]string{}}
	if v2 {
		// The cpu controller must be on for the root's children; turning it on again is a
		// no-op, and leaving it on changes nothing for a cgroup that sets no limit.
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			skipOrFail(tb, fmt.Sprintf("cannot enable the cpu controller: %v", err))
		}
	}
	if err := os.Mkdir(l.dir, 0o755); err != nil {
		skipOrFail(tb, fmt.Sprintf("cannot make a cgroup: %v", err))
	}
	tb.Cleanup(func() {
		if err := l.remove(); err != nil {
			tb.Errorf("removing the cgroup %s: %v", l.dir, err)
		}
	})
	us := int(period.Microseconds())
	quota := int(cpus * float64(us))
	l.procs = filepath.Join(l.dir, "cgroup.procs")
	var err error
	if v2 {
		err = os.WriteFile(filepath.Join(l.dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, us), 0)
	} else {
		err = os.WriteFile(filepath.Join(l.dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(us)), 0)
		if err == nil {
			err = os.WriteFile(filepath.Join(l.dir, "cpu.cfs_quota_us"), []byte(strconv.Itoa(quota)), 0)
		}
	}
	if err != nil {
		tb.Fatalf("setting the CPU quota of %s: %v", l.dir, err)
	}
	return l
}

func skipOrFail(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s, and CI needs the starvation test", why)
	}
	tb.Skipf("%s: the starvation test needs a cgroup it may write (run as root; it fails instead when CI is set)", why)
}

// add moves the process pid (all its threads) into the cgroup.
func (l *cpuLimit) add(pid int) error {
	from, err := cgroupOf(pid, l.root)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.procs, []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("moving %d into %s: %w", pid, l.dir, err)
	}
	l.back[pid] = from
	return nil
}

// release puts every process moved in back where it came from; the cgroup stays, empty.
func (l *cpuLimit) release() error {
	var errs []error
	for pid, from := range l.back {
		err := os.WriteFile(filepath.Join(from, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		if err != nil && !errors.Is(err, syscall.ESRCH) { // a process that exited is nowhere
			errs = append(errs, fmt.Errorf("moving %d back to %s: %w", pid, from, err))
		}
		delete(l.back, pid)
	}
	return errors.Join(errs...)
}

// remove releases the processes and removes the cgroup.
func (l *cpuLimit) remove() error {
	err := l.release()
	if rerr := os.Remove(l.dir); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// cgroupOf returns the directory, under root, of the cgroup of pid in root's hierarchy.
func cgroupOf(pid int, root string) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	v2 := root == "/sys/fs/cgroup"
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if (v2 && f[0] == "0") || (!v2 && strings.Contains(","+f[1]+",", ",cpu,")) {
			return filepath.Join(root, f[2]), nil
		}
	}
	return "", fmt.Errorf("no cpu cgroup in /proc/%d/cgroup", pid)
}

// sweepCPULimits removes the cgroups that runs killed before their cleanup left: the
// processes still in one (that run's corral serve nodes, which outlived it) are killed, and
// the cgroup removed.
func sweepCPULimits(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, cgroupPrefix+"*"))
	for _, dir := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), cgroupPrefix), "-")
		owner, err := strconv.Atoi(pid)
		if err != nil || syscall.Kill(owner, 0) != syscall.ESRCH {
			continue // not one of ours, or its run is alive
		}
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		for range 50 { // a killed process leaves its cgroup once it has exited
			if os.Remove(dir) == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
