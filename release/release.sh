#!/usr/bin/env bash
# Builds a corral release into $OUT (default out/release/$VERSION) — `make release` runs it:
#
#   corral-$VERSION-linux-$ARCH              the static binary (CGO_ENABLED=0, -trimpath, -s -w,
#                                            -buildid=, the version and commit stamped with -X)
#   corral-$VERSION-linux-$ARCH.cdx.json     its SBOM, CycloneDX 1.5 (release/sbom): every module
#                                            linked in, from the binary's own build information
#   corral-$VERSION-linux-$ARCH.image.tar    the image, built FROM scratch with the Dockerfile,
#                                            tagged $IMAGE_REPO:$VERSION, as docker save writes it
#                                            (for docker load, kind load image-archive, ctr import)
#   SHA256SUMS                               the hashes of all of the above
#   SHA256SUMS.sig                           with SIGNING_KEY (an SSH private key): its signature,
#                                            ssh-keygen -Y sign, namespace "file"
#
# for each ARCH of $ARCHES (default "amd64 arm64"). Docker keeps $IMAGE_REPO:$VERSION-$ARCH for
# each, and $IMAGE_REPO:$VERSION for this machine's architecture: the image the chart names by
# default (image.repository corral, image.tag "" = appVersion).
#
# Reproducible: the same commit and Go toolchain give the same binaries, SBOMs and image layers,
# byte for byte; every timestamp is the commit's (SOURCE_DATE_EPOCH). The image's config is not:
# Docker's legacy builder (what this Docker has; BuildKit, which honours SOURCE_DATE_EPOCH, is
# not installed) writes the time of the build into it, so the image ID changes from build to
# build while its one layer does not.
#
# It refuses a VERSION that is not the chart's appVersion (charts/corral/Chart.yaml), so the
# chart always names the image a release builds.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(cat VERSION)}
OUT=${OUT:-out/release/$VERSION}
IMAGE_REPO=${IMAGE_REPO:-corral}
ARCHES=${ARCHES:-amd64 arm64}

chart=$(sed -n 's/^appVersion: *"\([^"]*\)".*/\1/p' charts/corral/Chart.yaml)
if [ "$chart" != "$VERSION" ]; then
	echo "release.sh: VERSION is $VERSION but charts/corral/Chart.yaml has appVersion \"$chart\": make them agree (the file VERSION, the chart's appVersion)" >&2
	exit 1
fi
if ! [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release.sh: VERSION \"$VERSION\" is not a semantic version such as 0.1.0" >&2
	exit 1
fi

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
	commit="$commit+modified"
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
host=$($GO env GOARCH)

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

for arch in $ARCHES; do
	bin=corral-$VERSION-linux-$arch
	echo "release.sh: $bin" >&2
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch $GO build -trimpath \
		-ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$commit" \
		-o "$OUT/$bin" ./cmd/corral
	$GO run ./release/sbom -version "$VERSION" -commit "$commit" "$OUT/$bin" >"$OUT/$bin.cdx.json"

	# The image: the Dockerfile and the binary alone as the context; the binary's time is the
	# commit's, since the layer's tar records it.
	cp Dockerfile "$ctx/Dockerfile"
	cp "$OUT/$bin" "$ctx/corral"
	touch -d "@$SOURCE_DATE_EPOCH" "$ctx/corral"
	docker build -q --platform "linux/$arch" \
		--label "org.opencontainers.image.title=corral" \
		--label "org.opencontainers.image.version=$VERSION" \
		--label "org.opencontainers.image.revision=$commit" \
		--label "org.opencontainers.image.created=$created" \
		--label "org.opencontainers.image.source=https://github.com/corralcache/corral" \
		-t "$IMAGE_REPO:$VERSION-$arch" "$ctx" >/dev/null
	# Saved under the chart's name for it, $IMAGE_REPO:$VERSION, whatever the architecture:
	# imported on a node of that architecture, it is the image the chart's pods run.
	docker tag "$IMAGE_REPO:$VERSION-$arch" "$IMAGE_REPO:$VERSION"
	docker save -o "$OUT/$bin.image.tar" "$IMAGE_REPO:$VERSION"
done
if docker image inspect "$IMAGE_REPO:$VERSION-$host" >/dev/null 2>&1; then
	docker tag "$IMAGE_REPO:$VERSION-$host" "$IMAGE_REPO:$VERSION"
fi

(cd "$OUT" && rm -f SHA256SUMS SHA256SUMS.sig && sha256sum corral-"$VERSION"-* >SHA256SUMS)
if [ -n "${SIGNING_KEY:-}" ]; then
	ssh-keygen -q -Y sign -f "$SIGNING_KEY" -n file "$OUT/SHA256SUMS"
fi
echo "$OUT"
