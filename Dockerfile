# corral's image: the static binary alone, FROM scratch (no base image is needed or pulled).
# Built by `make image`, which compiles bin/image/corral with CGO_ENABLED=0 first.
FROM scratch
COPY corral /corral
# A non-root user (the "nonroot" UID of distroless images); no /etc/passwd is needed.
USER 65532:65532
EXPOSE 7946/tcp 7946/udp 7947/tcp 8080/tcp
ENTRYPOINT ["/corral"]
CMD ["serve"]
