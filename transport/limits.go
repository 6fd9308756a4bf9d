package transport

// DefaultMaxMessageSize is the bound on one peer message, in bytes, when a
// config leaves MaxMessageSize at zero: the 8 MiB value limit of corral
// groups plus 64 KiB for the key (at most 4 KiB), group name, header and
// protobuf framing. gRPC's own default (4 MiB) would refuse legal values.
const DefaultMaxMessageSize = 8<<20 + 64<<10
