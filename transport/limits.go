package transport

// DefaultMaxMessageSize is the bound on one peer message, in bytes, when a
// config leaves MaxMessageSize at zero: the 8 MiB value limit of corral
// groups plus 64 KiB for the key (at most 4 KiB), group name, header and
// protobuf framing. gRPC's own default (4 MiB) would refuse legal values.
const DefaultMaxMessageSize = 8<<20 + 64<<10

// HTTP/2 flow-control windows of peer connections, both sides: fixed, not grown by grpc-go's
// bandwidth-delay estimate. That estimate pings the peer whenever data arrives and no ping is
// out, which on a peer connection means once per Get each way: a PING and its ACK in each
// direction, and a WINDOW_UPDATE, around every 100-byte answer (12 of a remote hit's 90
// allocations, measured with BenchmarkRemoteHit). A window as large as its estimate would
// grow to for the values corral carries does the same job without the pings: 1 MiB per stream
// keeps a 1 MiB value or a handoff's entries moving at ≈ 1 GB/s across a 1 ms round trip,
// and 4 MiB per connection bounds the unread bytes one peer can leave in this node's memory
// (the estimate lets that grow to 16 MiB).
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// DefaultMaxStreamCalls bounds the Gets in flight on one Get stream, each way: a Client
// waits for a free slot before it sends, and a Server answers a call past its bound with an
// error wrapping ErrStreamFull. 1024 callers of one peer at once is far past any fan-in a
// node sees; the bound is there so that one peer cannot make a node hold unbounded work.
const DefaultMaxStreamCalls = 1024

// DefaultMaxStreamAnswer is the largest answer a Server sends on a stream for a value it
// holds (ServerConfig.MaxStreamAnswer): 64 KiB, where a unary call costs what the stream
// does (BenchmarkGetValueSize) and a transfer takes ≈ 0.1 ms here.
const DefaultMaxStreamAnswer = 64 << 10
