#!/usr/bin/env bash
# Builds the tools the Kubernetes tests run, from the Go modules pinned in tools/go.mod and
# tools/coredns/go.mod, into a cache directory keyed by their versions and go.sum files, and
# prints that directory:
#
#   control plane   etcd, kube-apiserver, kube-controller-manager, kube-scheduler
#   node            kubelet, kube-proxy, coredns (only the plugins the tests' cluster DNS needs)
#   clients         helm, kubectl
#
# Idempotent: a binary already in the cache is not rebuilt, and a build interrupted half-way
# leaves nothing behind (each binary is written under a temporary name and renamed); a second
# build.sh run at the same time waits for the first instead of building again. Cold, on 2
# busy cores: about 50 minutes, kube-controller-manager (built first of the Kubernetes binaries,
# whose packages the others reuse) half of it — see e2e/k8s/node/doc.go; warm: well under a
# second. CoreDNS has a directory of its own
# (its module moves apart from Kubernetes'), linked into the printed one.
#
#   dir=$(e2e/k8s/build.sh)        # CORRAL_E2E_CACHE overrides $HOME/.cache/corral-e2e
set -euo pipefail
cd "$(dirname "$0")/tools"
GO=${GO:-go}
cache=${CORRAL_E2E_CACHE:-$HOME/.cache/corral-e2e}

ver() { "$GO" list -m -f '{{.Version}}' "$1"; }
k8s=$(ver k8s.io/kubernetes)
etcd=$(ver go.etcd.io/etcd/server/v3)
helm=$(ver helm.sh/helm/v3)
sum=$(cat go.mod go.sum etcd/main.go | sha256sum | cut -c1-12)
dir=$cache/k8s-$k8s-etcd-$etcd-helm-$helm-$sum
coredns=$(cd coredns && ver github.com/coredns/coredns)
dnsdir=$cache/coredns-$coredns-$(cat coredns/go.mod coredns/go.sum coredns/main.go | sha256sum | cut -c1-12)
mkdir -p "$dir" "$dnsdir"
# One build at a time: a second build.sh (make e2e-k8s beside a build already running,
# say) waits for the first, then finds every binary built.
exec 9>"$cache/.k8s.lock"
flock 9

# kubectl, helm and client-go parse the version the API server reports; a module build says
# v0.0.0-master unless told.
minor=$(echo "$k8s" | cut -d. -f2)
kver="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
# helm's own version, and the Kubernetes version `helm template` and `helm lint` assume.
hver="-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"

build() { # dir name package ldflags
	[ -x "$1/$2" ] && return
	echo "build.sh: building $2 into $1" >&2
	local start=$SECONDS
	CGO_ENABLED=0 nice -n 10 "$GO" build -trimpath -ldflags "-s -w $4" -o "$1/.$2.tmp" "$3"
	mv "$1/.$2.tmp" "$1/$2"
	echo "build.sh: $2 took $((SECONDS - start))s" >&2
}
build "$dir" etcd ./etcd ""
build "$dir" helm helm.sh/helm/v3/cmd/helm "$hver"
build "$dir" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kver"
build "$dir" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kver"
build "$dir" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kver"
build "$dir" kubectl k8s.io/kubernetes/cmd/kubectl "$kver"
build "$dir" kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$kver"
build "$dir" kubelet k8s.io/kubernetes/cmd/kubelet "$kver"
(cd coredns && build "$dnsdir" coredns . "")
ln -sfn "$dnsdir/coredns" "$dir/coredns"
echo "$dir"
