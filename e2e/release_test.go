package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRelease runs make release's script as far as this machine allows — no registry, Docker's
// legacy builder, no cosign — and checks what it made: static binaries for linux/amd64 and
// linux/arm64 that report the version, their SBOMs, images FROM scratch whose one layer is the
// binary (the amd64 one run with docker run), checksums and their SSH signature, and that a
// second build gives the same binaries, SBOMs and layers.
func TestRelease(t *testing.T) {
	needDocker(t)
	v, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	repo := fmt.Sprintf("corral-e2e-release-%d", time.Now().UnixNano()%1e9) // never the user's corral:<version>
	t.Cleanup(func() {
		exec.Command("docker", "rmi", "-f", repo+":"+version, repo+":"+version+"-amd64", repo+":"+version+"-arm64").Run()
	})

	// An SSH key made for this run signs the checksums; allowed_signers is how a user checks.
	keys := t.TempDir()
	key := filepath.Join(keys, "release")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "release@corral", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(keys, "allowed_signers")
	if err := os.WriteFile(allowed, []byte("release@corral "+string(pub)), 0o644); err != nil {
		t.Fatal(err)
	}

	release := func(out string) {
		t.Helper()
		cmd := exec.Command("release/release.sh")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "OUT="+out, "IMAGE_REPO="+repo, "SIGNING_KEY="+key)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("release/release.sh: %v\n%s", err, b)
		}
	}
	out := t.TempDir()
	release(out)

	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(out, "corral-"+version+"-linux-"+arch)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		if f.Machine != machines[arch] {
			t.Errorf("%s is for %v", bin, f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked", bin)
			}
		}
		f.Close()
		gv, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\tbuild\t-trimpath=true\n", "\tbuild\tCGO_ENABLED=0\n", "\tbuild\tGOARCH=" + arch + "\n"} {
			if !strings.Contains(string(gv), want) {
				t.Errorf("go version -m %s lacks %q", bin, strings.TrimSpace(want))
			}
		}

		// The SBOM describes this binary.
		var bom struct {
			Metadata struct {
				Component struct {
					Version string
					Hashes  []struct{ Alg, Content string }
				}
			}
			Components []struct{ Name, Version string }
		}
		sb, err := os.ReadFile(bin + ".cdx.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sb, &bom); err != nil {
			t.Fatalf("%s.cdx.json: %v", bin, err)
		}
		c := bom.Metadata.Component
		if c.Version != version || len(c.Hashes) != 1 || c.Hashes[0].Content != sha256File(t, bin) {
			t.Errorf("%s.cdx.json describes version %q, hashes %v", bin, c.Version, c.Hashes)
		}
		if !slices.ContainsFunc(bom.Components, func(m struct{ Name, Version string }) bool {
			return m.Name == "github.com/hashicorp/memberlist"
		}) {
			t.Errorf("%s.cdx.json does not list memberlist", bin)
		}

		// The image: FROM scratch, one layer holding the binary alone.
		if layers := imageLayerFiles(t, bin+".image.tar"); !slices.Equal(layers, []string{"corral"}) {
			t.Errorf("%s.image.tar: layer files %v, want the binary alone", bin, layers)
		}
		inspect := docker(t, "image", "inspect", "-f", "{{.Architecture}} {{.Os}} {{len .RootFS.Layers}} {{.Config.User}} {{json .Config.Entrypoint}} {{index .Config.Labels \"org.opencontainers.image.version\"}}", repo+":"+version+"-"+arch)
		if want := fmt.Sprintf("%s linux 1 65532:65532 [\"/corral\"] %s", arch, version); strings.TrimSpace(inspect) != want {
			t.Errorf("image %s:%s-%s: %q, want %q", repo, version, arch, strings.TrimSpace(inspect), want)
		}
	}
	// The binary and the image of this machine report the version.
	wantVersion := "corral " + version + " ("
	if got, err := exec.Command(filepath.Join(out, "corral-"+version+"-linux-amd64"), "version").Output(); err != nil || !strings.HasPrefix(string(got), wantVersion) {
		t.Errorf("corral version: %q, %v; want %q…", got, err, wantVersion)
	}
	if got := docker(t, "run", "--rm", repo+":"+version+"-amd64", "--version"); !strings.HasPrefix(got, wantVersion) || !strings.Contains(got, "linux/amd64") {
		t.Errorf("docker run %s:%s-amd64 --version: %q", repo, version, got)
	}

	// SHA256SUMS holds every artifact, and its signature checks.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.Lines(string(sums)) {
		sum, name, _ := strings.Cut(strings.TrimSpace(line), "  ")
		if got := sha256File(t, filepath.Join(out, name)); got != sum {
			t.Errorf("SHA256SUMS: %s is %s, the file %s", name, sum, got)
		}
		listed = append(listed, name)
	}
	if len(listed) != 6 {
		t.Errorf("SHA256SUMS lists %v, want the 2 binaries, 2 SBOMs and 2 images", listed)
	}
	verify := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "release@corral", "-n", "file", "-s", filepath.Join(out, "SHA256SUMS.sig"))
	verify.Stdin = bytes.NewReader(sums)
	if b, err := verify.CombinedOutput(); err != nil {
		t.Errorf("ssh-keygen -Y verify SHA256SUMS: %v\n%s", err, b)
	}

	// Built again: the same binaries, SBOMs and image layers, byte for byte. (The image IDs
	// differ: the legacy builder writes the build's time into the image's config.)
	layersOf := func(arch string) string {
		return docker(t, "image", "inspect", "-f", "{{json .RootFS.Layers}}", repo+":"+version+"-"+arch)
	}
	first := map[string]string{"amd64": layersOf("amd64"), "arm64": layersOf("arm64")}
	again := t.TempDir()
	release(again)
	for _, arch := range []string{"amd64", "arm64"} {
		for _, suffix := range []string{"", ".cdx.json"} {
			name := "corral-" + version + "-linux-" + arch + suffix
			if a, b := sha256File(t, filepath.Join(out, name)), sha256File(t, filepath.Join(again, name)); a != b {
				t.Errorf("%s differs between two builds: %s, %s", name, a, b)
			}
		}
		if l := layersOf(arch); l != first[arch] {
			t.Errorf("the %s image's layer differs between two builds: %s, %s", arch, first[arch], l)
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// imageLayerFiles returns the files of the layers of the one image in a docker save tarball,
// in order; it fails the test unless the tarball holds one image.
func imageLayerFiles(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			entries[h.Name] = b
		}
	}
	var manifest []struct{ Layers []string }
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json %s (%v)", path, entries["manifest.json"], err)
	}
	var files []string
	for _, l := range manifest[0].Layers {
		lr := tar.NewReader(bytes.NewReader(entries[l]))
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", path, l, err)
			}
			files = append(files, h.Name)
		}
	}
	return files
}
