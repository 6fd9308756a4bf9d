#!/usr/bin/env bash
# Builds the tools the Kubernetes tests run — kube-apiserver, kube-controller-manager, etcd and
# helm — from the Go modules pinned in tools/go.mod, into a cache directory keyed by their
# versions and by tools/go.sum, and prints that directory. Idempotent: a binary already in the
# cache is not rebuilt, and a build interrupted half-way leaves nothing behind (each binary is
# written under a temporary name and renamed). Cold: about 10 minutes on 2 cores (kube-apiserver
# is most of it); warm: well under a second.
#
#   dir=$(e2e/k8s/build.sh)        # CORRAL_E2E_CACHE overrides $HOME/.cache/corral-e2e
set -euo pipefail
cd "$(dirname "$0")/tools"
GO=${GO:-go}

ver() { "$GO" list -m -f '{{.Version}}' "$1"; }
k8s=$(ver k8s.io/kubernetes)
etcd=$(ver go.etcd.io/etcd/server/v3)
helm=$(ver helm.sh/helm/v3)
sum=$(cat go.mod go.sum etcd/main.go | sha256sum | cut -c1-12)
dir=${CORRAL_E2E_CACHE:-$HOME/.cache/corral-e2e}/k8s-$k8s-etcd-$etcd-helm-$helm-$sum
mkdir -p "$dir"

# kubectl, helm and client-go parse the version the API server reports; a module build says
# v0.0.0-master unless told.
minor=$(echo "$k8s" | cut -d. -f2)
kver="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
# helm's own version, and the Kubernetes version `helm template` and `helm lint` assume.
hver="-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"

build() { # name package ldflags
	[ -x "$dir/$1" ] && return
	echo "build.sh: building $1 into $dir" >&2
	local start=$SECONDS
	CGO_ENABLED=0 nice -n 10 "$GO" build -trimpath -ldflags "-s -w $3" -o "$dir/.$1.tmp" "$2"
	mv "$dir/.$1.tmp" "$dir/$1"
	echo "build.sh: $1 took $((SECONDS - start))s" >&2
}
build etcd ./etcd ""
build helm helm.sh/helm/v3/cmd/helm "$hver"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kver"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kver"
echo "$dir"
