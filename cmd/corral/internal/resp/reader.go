package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/batch"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
)

// The Redis protocol's request reader. A request is a multibulk array
// (*<count>\r\n then <count> times $<length>\r\n<bytes>\r\n), as every client sends, or an
// inline line of words (PING\r\n, SET k "a b"\r\n: inline.go), as a person at a terminal
// types. The reader is corral's
// own, small and flat, because every number in a request is the sender's to choose:
//
//   - A count or a length is parsed from at most a few digits and checked against the
//     limits (requestLimits) before anything is allocated or looped on: a 4 GiB length or a
//     count of 2^40 is an error at once, answered and followed by the connection's close.
//   - A bulk's buffer grows with the bytes that arrive (doubling from at most 64 KiB), never
//     to the length announced: a client that announces 8 MiB and sends one byte costs 64 KiB.
//     Bytes beyond the first 64 KiB of a command are reserved from a node-wide budget
//     (pendingBudget) until the command has run, so many connections sending large commands
//     slowly cannot together hold more than the budget.
//   - Nothing recurses: a command sent one byte per write costs what it costs whole.

// requestLimits bound one request.
type requestLimits struct {
	command int // bytes of one command, framing included
	args    int // arguments of one command, its name included
	inline  int // bytes of one inline command line
	// step is the most a bulk's buffer takes before its bytes arrive, and the bytes of a
	// command not reserved from the node-wide budget (bulkStep).
	step int
}

// Fixed bounds of a request. maxArgs: corral's commands take at most 8 arguments but MGET,
// DEL and EXISTS take any number of keys; MGET's bound is a batch read's (batch.MaxKeys), and
// the others share it. maxInlineBytes is Redis's own (PROTO_INLINE_MAX_SIZE). A header line
// ("*3\r\n", "$5\r\n") is a type byte, at most 18 digits and CRLF: longer is not a number any
// limit allows. minBulkBytes is the smallest argument on the wire, "$0\r\n\r\n".
const (
	maxArgs        = 1 + batch.MaxKeys
	maxInlineBytes = 64 << 10
	maxHeaderLine  = 1 + 18 + 2
	minBulkBytes   = 6
	// bulkStep is the most a bulk's buffer takes before its bytes arrive, and the part of a
	// command that is not reserved from the node-wide budget.
	bulkStep = 64 << 10
)

// argsError is a command of more arguments than the bound, read whole and dropped: the
// client is told, and the connection goes on with its next command. (A count that could not
// fit the command's byte bound even with empty arguments is a protoError at once.)
type argsError struct {
	name  string // the command's name in lower case, if it is at most 16 bytes
	count int    // the arguments, its name included; 0: more than the bound (an inline line)
}

func (e *argsError) Error() string {
	if e.count == 0 {
		return fmt.Sprintf("a command of more than %d arguments", maxArgs)
	}
	return fmt.Sprintf("a command of %d arguments", e.count)
}

// protoError is a request the reader refuses: the client is told (-ERR Protocol error:
// …) and the connection closes, as Redis does, since what follows cannot be framed.
type protoError struct {
	limit limithits.Limit // counted in corral_http_limit_hits_total
	msg   string
}

func (e *protoError) Error() string { return "Protocol error: " + e.msg }

func protoErr(limit limithits.Limit, format string, args ...any) error {
	return &protoError{limit: limit, msg: fmt.Sprintf(format, args...)}
}

// pendingBudget is the node-wide bound on the bytes held by commands still being read.
type pendingBudget struct {
	max  int64
	held atomic.Int64
}

// reserve takes n bytes from the budget; false means the budget would be exceeded.
func (b *pendingBudget) reserve(n int) bool {
	if b == nil {
		return true
	}
	if b.held.Add(int64(n)) > b.max {
		b.held.Add(-int64(n))
		return false
	}
	return true
}

func (b *pendingBudget) release(n int) {
	if b != nil && n > 0 {
		b.held.Add(-int64(n))
	}
}

// reader reads requests from r. It is not safe for concurrent use.
type reader struct {
	r      *bufio.Reader
	lim    requestLimits
	budget *pendingBudget // nil = no node-wide bound

	cmdBytes int       // bytes the current command's arguments hold, in the arena or not
	held     int       // of those, the bytes reserved from budget
	args     [][]byte  // the current command's arguments: reused, command after command
	arena    []byte    // small arguments' bytes: reused, command after command (see bulk)
	used     int       // bytes of arena the current command's arguments hold
	reading  bool      // a command's first byte has been read and its last not yet
	began    time.Time // when the command being read first waited for bytes; zero before (conn.Read)
	// allocated counts every byte the reader allocated for arguments, for the fuzz target.
	allocated int
}

func newReader(r *bufio.Reader, lim requestLimits, budget *pendingBudget) *reader {
	return &reader{r: r, lim: lim, budget: budget}
}

// command reads the next command: its arguments, the name first (never empty). Empty
// commands (an empty line, *0, *-1) are skipped, as Redis skips them. An *argsError is a
// command of too many arguments, read and dropped: the connection goes on. Any other error
// ends the connection: a *protoError says what the client sent wrong; io.EOF and the
// connection's errors pass through. The arguments — the slice and the bytes of each — are
// the caller's until the next call, and its reservation until done: a command that keeps
// an argument's bytes past that (a value it stores) copies them.
func (rr *reader) command() ([][]byte, error) {
	rr.done()
	for {
		b, err := rr.r.Peek(1)
		if err != nil {
			return nil, err
		}
		// The clock is read only if the command has to wait for more bytes (conn.Read): a
		// pipelined command already here costs no time.Now.
		rr.reading, rr.began = true, time.Time{}
		var args [][]byte
		if b[0] == '*' {
			args, err = rr.multibulk()
		} else {
			args, err = rr.inlineCommand()
		}
		if err != nil || len(args) > 0 {
			return args, err
		}
	}
}

// done gives the current command's reservation back: call it once the command has run.
func (rr *reader) done() {
	rr.budget.release(rr.held)
	rr.cmdBytes, rr.held, rr.reading, rr.used = 0, 0, false, 0
}

// line reads one line, LF included, of at most max bytes. The slice is valid until the
// next read.
func (rr *reader) line(max int) ([]byte, bool, error) {
	var long []byte
	for {
		frag, err := rr.r.ReadSlice('\n')
		if len(long)+len(frag) > max {
			return nil, false, nil
		}
		switch {
		case err == nil && long == nil:
			return frag, true, nil
		case err == nil:
			return append(long, frag...), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			long = append(long, frag...)
		default:
			return nil, false, err
		}
	}
}

// header reads a "<kind><number>\r\n" line and returns the number: -1 or a count of at
// most 18 digits. ok is false for anything else.
func (rr *reader) header(kind byte) (n int, size int, ok bool, err error) {
	line, fits, err := rr.line(maxHeaderLine)
	if err != nil || !fits {
		return 0, len(line), false, err
	}
	if len(line) < 4 || line[0] != kind || line[len(line)-2] != '\r' {
		return 0, len(line), false, nil
	}
	digits := line[1 : len(line)-2]
	if string(digits) == "-1" {
		return -1, len(line), true, nil
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, len(line), false, nil
		}
	}
	// At most 18 digits (the line's bound): no overflow of an int64.
	v, _ := strconv.ParseInt(string(digits), 10, 64)
	return int(v), len(line), true, nil
}

func (rr *reader) multibulk() ([][]byte, error) {
	count, used, ok, err := rr.header('*')
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, protoErr(limithits.RESPProtocol, "invalid multibulk length")
	case count <= 0:
		return nil, nil // *0 and *-1: nothing to do
	case count > rr.lim.args && count > (rr.lim.command-used)/minBulkBytes:
		return nil, protoErr(limithits.RESPCommand, "a command of %d arguments exceeds the limit of %d", count, rr.lim.args)
	}
	// A command of too many arguments that could still fit the byte bound is read, within
	// it, and dropped: its name is kept for the reply, and its other arguments are not.
	keep := count <= rr.lim.args
	args := rr.args[:0]
	if keep && count > cap(args) {
		// The slice's headers are memory the command holds, as its bytes are.
		if !rr.charge(count * sliceHeaderBytes) {
			return nil, rr.budgetFull()
		}
		rr.allocated += count * sliceHeaderBytes
		args = make([][]byte, 0, count)
	}
	defer func() {
		// Kept, however the command ends, for the next; a long one is not kept, so that an
		// idle connection that once sent one does not hold it.
		rr.args = args[:0]
		if cap(args) > keptArgs {
			rr.args = nil
		}
	}()
	var name []byte
	for i := range count {
		c, err := rr.r.Peek(1)
		if err != nil {
			return nil, err
		}
		if c[0] != '$' {
			return nil, protoErr(limithits.RESPProtocol, "expected '$', got '%s'", printable(c[0]))
		}
		n, size, ok, err := rr.header('$')
		used += size
		switch {
		case err != nil:
			return nil, err
		case !ok || n < 0:
			return nil, protoErr(limithits.RESPProtocol, "invalid bulk length")
		case n > rr.lim.command-used-2:
			return nil, rr.tooLarge()
		}
		used += n + 2
		if !keep && i > 0 {
			if err := rr.skip(n); err != nil {
				return nil, err
			}
			continue
		}
		arg, err := rr.bulk(n)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			name = arg
		}
		if keep {
			args = append(args, arg)
		}
	}
	if len(name) == 0 {
		return nil, protoErr(limithits.RESPProtocol, "empty command name")
	}
	if !keep {
		return nil, &argsError{name: shortName(name), count: count}
	}
	return args, nil
}

// sliceHeaderBytes is what one argument costs in a command's slice of arguments, and
// keptArgs the longest slice a reader keeps for its next command.
const (
	sliceHeaderBytes = 24
	keptArgs         = 64
)

// shortName is a command's name in lower case for an argsError: "" when it is longer than 16
// bytes, which no command's is.
func shortName(b []byte) string {
	if len(b) > 16 {
		return ""
	}
	return strings.ToLower(string(b))
}

// skip reads n bytes of a dropped argument, and their CRLF.
func (rr *reader) skip(n int) error {
	if _, err := rr.r.Discard(n); err != nil {
		return unexpectedEOF(err)
	}
	return rr.crlf()
}

// crlf reads the CRLF that ends a bulk string.
func (rr *reader) crlf() error {
	for _, want := range []byte("\r\n") {
		c, err := rr.r.ReadByte()
		if err != nil {
			return unexpectedEOF(err)
		}
		if c != want {
			return protoErr(limithits.RESPProtocol, "a bulk string is not followed by CRLF")
		}
	}
	return nil
}

func (rr *reader) tooLarge() error {
	return protoErr(limithits.RESPCommand, "command exceeds the %d-byte limit", rr.lim.command)
}

// arenaBytes is the size of a reader's arena: a GET's name and key, a SET of a small value,
// fit, so that reading them allocates nothing once a connection has read its first command.
// It is part of what a connection costs, as its bufio buffers are.
const arenaBytes = 2 << 10

// bulk reads n bytes and their CRLF. An argument that fits what is left of the arena is read
// into it (the arena is reused by the next command); a larger one gets a buffer of its own,
// which grows as bytes arrive.
func (rr *reader) bulk(n int) ([]byte, error) {
	var buf []byte
	if n > 0 && n <= arenaBytes-rr.used {
		if rr.arena == nil {
			rr.arena = make([]byte, arenaBytes)
		}
		buf = rr.arena[rr.used : rr.used : rr.used+n] // capacity n: an append cannot reach the next
		rr.used += n
		rr.cmdBytes += n
	} else if buf = rr.alloc(nil, min(n, rr.lim.step)); buf == nil && n > 0 {
		return nil, rr.budgetFull()
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			if buf = rr.alloc(buf, min(2*cap(buf), n)); buf == nil {
				return nil, rr.budgetFull()
			}
		}
		k, err := rr.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	if err := rr.crlf(); err != nil {
		return nil, err
	}
	return buf, nil
}

// alloc returns buf grown to capacity size, or nil when the bytes past the command's first
// bulkStep cannot be reserved.
func (rr *reader) alloc(buf []byte, size int) []byte {
	if size == 0 {
		return []byte{}
	}
	grow := size - cap(buf)
	if !rr.charge(grow) {
		return nil
	}
	rr.allocated += grow
	nb := make([]byte, len(buf), size)
	copy(nb, buf)
	return nb
}

// charge counts n more bytes held by the current command: what it holds past its first
// bulkStep comes from the node-wide budget. It reports false, counting nothing, when the
// budget has no room for them.
func (rr *reader) charge(n int) bool {
	over := max(rr.cmdBytes+n-rr.lim.step, 0) - rr.held
	if over > 0 {
		if !rr.budget.reserve(over) {
			return false
		}
		rr.held += over
	}
	rr.cmdBytes += n
	return true
}

func (rr *reader) budgetFull() error {
	return &protoError{limit: limithits.RESPPendingBytes,
		msg: fmt.Sprintf("the node holds %d bytes of commands still being read, its limit (--resp-max-pending-bytes): try again", rr.budget.max)}
}

// inlineCommand reads a line and splits it as Redis does (inline.go): words separated by
// blanks, with double and single quotes and their escapes.
func (rr *reader) inlineCommand() ([][]byte, error) {
	line, fits, err := rr.line(rr.lim.inline)
	switch {
	case err != nil:
		return nil, unexpectedEOF(err)
	case !fits:
		return nil, protoErr(limithits.RESPCommand, "an inline command exceeds the %d-byte limit", rr.lim.inline)
	}
	// The line end is "\n", and a "\r" before it, as Redis takes them off.
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	args, err := splitInline(line, rr.lim.args)
	switch {
	case errors.Is(err, errUnbalancedQuotes):
		return nil, protoErr(limithits.RESPProtocol, "%v", err)
	case err != nil:
		// The line was read whole: the command is dropped, and the connection goes on.
		rr.allocated += len(line)
		return nil, &argsError{name: shortName(args[0])}
	case len(args) > 0 && len(args[0]) == 0:
		// "" or '' as the first word: as a multibulk command of an empty name is.
		return nil, protoErr(limithits.RESPProtocol, "empty command name")
	}
	rr.allocated += len(line) // splitInline's scratch
	for _, a := range args {
		rr.allocated += len(a)
	}
	return args, nil
}

// printable shows a byte in an error message: itself when printable, else escaped.
func printable(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(c)
	}
	return fmt.Sprintf("\\x%02x", c)
}

// unexpectedEOF turns an EOF in the middle of a command into io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
