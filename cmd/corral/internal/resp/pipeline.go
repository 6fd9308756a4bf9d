package resp

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// A pipeline's SETs. A corral SET is a write through the key's owner, which then tells every
// other member to drop its copies of the key, and answers once they have: on a cluster, two
// rounds of the network, where a Redis SET is a store in memory. A client that pipelines its
// SETs (redis-benchmark -P16, a go-redis Pipeline) sends them together and reads the replies
// together, so the SETs of a pipeline that have already arrived are applied together: the
// writes of keys owned here one after another, on the connection's goroutine (nothing to
// wait for), and those owned by other members all at once, each on a goroutine of its own —
// one round to the owners and one round of tells for the pipeline, instead of two rounds per
// SET one after another. Each is still a write of its own on the wire (one request to its
// owner, one tell per member): the peer protocol has no write of many keys.
//
// What Redis promises a pipeline still holds: the replies come in order, each SET's answer
// its own (an error in the middle of a pipeline answers that SET alone); every SET is applied
// before the connection's next command that is not a SET runs (a GET after a SET in one
// pipeline sees it) and before the connection waits for more bytes (the replies leave then);
// and a key named twice is written in order — its second SET starts a new batch. A client
// that hangs up mid-pipeline has its SETs that arrived whole applied, as Redis applies them.
// What does not hold: another connection may see a later SET of the batch before an earlier
// one of another key, as a Redis Cluster's shards apply a pipeline's keys independently.

// pendingSet is a SET read and not yet applied.
type pendingSet struct {
	key    string
	value  objects.Object
	expiry corral.Expiry // TTL 0: the group's TTL (--ttl), with expiry.Tags
	err    error         // what store answered
}

// Bounds of a batch of SETs: a batch is applied once it holds this many SETs or bytes of
// keys and values. The bytes bound what a connection holds beside its reader's bounds (a SET's
// arguments are copied out of the reader, whose reservation is then given back): 64 KiB
// more than a SET applied alone holds, a pipeline of 100 SETs of 512 bytes in one batch.
const (
	maxBatchSets  = 128
	maxBatchBytes = 64 << 10
)

// isSet reports whether a command's name is SET, in any case, without allocating.
func isSet(name []byte) bool { return len(name) == 3 && bytes.EqualFold(name, []byte("set")) }

// batches reports whether the command is a SET the connection may batch: one that would not
// be refused for want of AUTH (serveCommand answers that).
func (s *Server) batches(c *conn, args [][]byte) bool {
	return isSet(args[0]) && (s.cfg.Token == nil || c.authed)
}

// queueSet adds a SET to the connection's batch, and applies the batch once it is full, a
// SET names a key the batch holds, or no more bytes have arrived. A SET whose arguments are
// wrong is answered after the batch before it is applied.
func (c *conn) queueSet(args [][]byte) {
	w, bad := c.s.parseSet(args[1:])
	if bad != "" {
		c.applySets()
		c.writeError(bad)
		return
	}
	for i := range c.sets {
		if c.sets[i].key == w.key {
			c.applySets()
			break
		}
	}
	c.sets = append(c.sets, w)
	c.setBytes += len(w.key) + len(w.value.Body)
	if len(c.sets) >= maxBatchSets || c.setBytes >= maxBatchBytes || c.rd.r.Buffered() == 0 {
		c.applySets()
	}
}

// applySets applies the batch of SETs and writes their replies, in order.
func (c *conn) applySets() {
	sets := c.sets
	if len(sets) == 0 {
		return
	}
	s := c.s
	var remote [(maxBatchSets + 63) / 64]uint64 // the SETs of keys owned elsewhere, as bits
	someRemote := false
	if len(sets) > 1 {
		self := s.cfg.Node.Name()
		for i := range sets {
			if s.cfg.Node.Owner(sets[i].key).Name != self {
				remote[i/64] |= 1 << (i % 64)
				someRemote = true
			}
		}
	}
	if someRemote {
		c.storeAtOnce(sets, &remote)
	} else {
		for i := range sets {
			sets[i].err = s.store(sets[i])
		}
	}
	for _, w := range sets {
		s.setReply(c, w.err)
	}
	c.clearSets()
}

// storeAtOnce runs the SETs of keys owned elsewhere (remote's bits) each on a goroutine of its
// own, and the others one after another meanwhile, and returns when all have. A panic of one
// is raised again on the connection's goroutine once all have returned.
func (c *conn) storeAtOnce(sets []pendingSet, remote *[(maxBatchSets + 63) / 64]uint64) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked any
	)
	store := func(i int) {
		defer func() {
			if p := recover(); p != nil {
				mu.Lock()
				panicked = fmt.Sprintf("%v\n%s", p, debug.Stack())
				mu.Unlock()
			}
		}()
		sets[i].err = c.s.store(sets[i])
	}
	for i := range sets {
		if remote[i/64]&(1<<(i%64)) != 0 {
			wg.Go(func() { store(i) })
		}
	}
	for i := range sets {
		if remote[i/64]&(1<<(i%64)) == 0 {
			store(i)
		}
	}
	wg.Wait()
	if panicked != nil {
		c.clearSets()
		panic(panicked) // on the connection's goroutine, which recovers it (serve)
	}
}

// clearSets empties the batch, keeping its array for the next one.
func (c *conn) clearSets() {
	clear(c.sets)
	c.sets, c.setBytes = c.sets[:0], 0
}
