package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The images the node runs, each a static Go binary FROM scratch: built with docker build,
// saved with docker save and imported into the node's containerd (nothing is pulled; every pod
// of the tests says imagePullPolicy: Never). The names are the tests' own, so that they never
// meet an image of another test on the same Docker.
const (
	corralImage  = "corral-e2e/corral:node"
	originImage  = "corral-e2e/origin:node"
	loadgenImage = "corral-e2e/loadgen:node"
	pauseImage   = "docker.io/corral-e2e/pause:node"
	exampleImage = "corral-e2e/catalog:node"
)

// image is how one image is made: a binary built from a package of a module, and a Dockerfile.
type image struct {
	name       string
	module     string // directory of the module, from the repository root
	pkg        string // package, from the module
	binary     string
	dockerfile string // from the repository root
}

func images() []image {
	generic := "e2e/k8s/node/images/Dockerfile"
	return []image{
		{corralImage, ".", "./cmd/corral", "corral", "Dockerfile"},
		{originImage, "e2e/faults", "./origin", "origin", generic},
		{loadgenImage, "e2e/k8s", "./node/images/loadgen", "loadgen", generic},
		{pauseImage, "e2e/k8s", "./node/images/pause", "pause", generic},
		{exampleImage, ".", "./examples/catalog", "catalog", "examples/catalog/Dockerfile"},
	}
}

// buildImages builds every image and imports them all into the node's containerd.
func buildImages(n *node) error {
	dir, err := os.MkdirTemp("", "corral-e2e-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var names []string
	for _, im := range images() {
		ctx := filepath.Join(dir, im.binary)
		if err := os.MkdirAll(ctx, 0o755); err != nil {
			return err
		}
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(ctx, im.binary), im.pkg)
		build.Dir = filepath.Join(repoRoot, im.module)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", im.pkg, err, out)
		}
		df, err := os.ReadFile(filepath.Join(repoRoot, im.dockerfile))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), df, 0o644); err != nil {
			return err
		}
		out, err := exec.Command("docker", "build", "-q", "--build-arg", "BIN="+im.binary, "-t", im.name, ctx).CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker build %s: %v\n%s", im.name, err, out)
		}
		names = append(names, im.name)
	}
	tar := filepath.Join(dir, "images.tar")
	if out, err := exec.Command("docker", append([]string{"save", "-o", tar}, names...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("docker save: %v\n%s", err, out)
	}
	if out, err := n.ctr("images", "import", tar); err != nil {
		return fmt.Errorf("ctr images import: %v\n%s", err, out)
	}
	out, err := n.ctr("images", "ls", "-q")
	if err != nil {
		return fmt.Errorf("ctr images ls: %v\n%s", err, out)
	}
	for _, name := range names {
		full := name
		if strings.Count(name, "/") == 1 {
			full = "docker.io/" + name
		}
		if !strings.Contains(string(out), full) {
			return fmt.Errorf("image %s is not in the node's containerd after the import:\n%s", full, out)
		}
	}
	return nil
}
