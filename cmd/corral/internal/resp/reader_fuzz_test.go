package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// fuzzLimits are small, so that inputs reach every bound.
var fuzzLimits = requestLimits{command: 4 << 10, args: 16, inline: 256, step: 256}

// readCommands reads every command of in through a reader whose Reads return at most step
// bytes, with a node-wide budget of budget bytes: the commands, the error that ended the
// stream, and the bytes the reader allocated. A command dropped for its arguments (an
// argsError, after which the reader goes on) is in cmds as one argument, refusedMark and the
// error.
func readCommands(in []byte, step int, budget int64) (cmds [][][]byte, err error, allocated int, held int64) {
	b := &pendingBudget{max: budget}
	rr := newReader(bufio.NewReaderSize(&chunkReader{in, step}, 8<<10), fuzzLimits, b)
	for {
		args, err := rr.command()
		var ae *argsError
		if errors.As(err, &ae) {
			cmds = append(cmds, [][]byte{[]byte(refusedMark + fmt.Sprintf("%s %+v", ae, *ae))})
			rr.done()
			continue
		}
		if err != nil {
			rr.done()
			return cmds, err, rr.allocated, b.held.Load()
		}
		// The arguments' bytes are the reader's again at the next command: keep copies.
		kept := make([][]byte, len(args))
		for i, a := range args {
			kept[i] = bytes.Clone(a)
		}
		cmds = append(cmds, kept)
		rr.done()
	}
}

// refusedMark begins readCommands' record of a command dropped for its arguments.
const refusedMark = "\x00refused: "

// chunkReader returns at most step bytes a Read, as a client writing a byte at a time does.
type chunkReader struct {
	b    []byte
	step int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// encode writes a command as a client does: a multibulk array.
func encode(args [][]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// FuzzRESPReader feeds byte streams to the Redis protocol's request reader, whole and in
// reads of 1 to 7 bytes. Whatever the bytes: the reader does not panic and ends; it reads
// the same commands, drops the same commands of too many arguments, and ends with the same
// error, however the bytes arrive; every command has a name and at most the argument bound,
// and fits the byte bound; the reader allocates
// at most twice the bytes it was sent plus one command's bound (never what a header
// announced); every byte reserved from the node-wide budget is given back; and a command
// written again as a client writes it reads back the same.
func FuzzRESPReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte, step byte) {
		cmds, err, allocated, held := readCommands(in, len(in)+1, 2<<10)
		small, smallErr, _, _ := readCommands(in, 1+int(step)%7, 2<<10)
		if !equalCommands(cmds, small) || fmt.Sprint(err) != fmt.Sprint(smallErr) {
			t.Fatalf("whole: %q, %v; in reads of %d bytes: %q, %v", cmds, err, 1+int(step)%7, small, smallErr)
		}
		var pe *protoError
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &pe) {
			t.Fatalf("the stream ended with %v: want EOF or a protocol error", err)
		}
		if allocated > 2*len(in)+fuzzLimits.command {
			t.Fatalf("%d bytes allocated for %d bytes sent", allocated, len(in))
		}
		if held != 0 {
			t.Fatalf("%d bytes of the budget still held", held)
		}
		for _, args := range cmds {
			if len(args) == 1 && bytes.HasPrefix(args[0], []byte(refusedMark)) {
				continue // a command of too many arguments, dropped: nothing to check but the above
			}
			size := len(encode(args))
			switch {
			case len(args) == 0 || len(args[0]) == 0:
				t.Fatalf("a command without a name: %q", args)
			case len(args) > fuzzLimits.args:
				t.Fatalf("%d arguments, over the bound of %d", len(args), fuzzLimits.args)
			case size > fuzzLimits.command && !fitsInline(args):
				t.Fatalf("a command of %d bytes, over the bound of %d", size, fuzzLimits.command)
			}
			again, err, _, _ := readCommands(encode(args), 1<<20, 4<<10)
			if !errors.Is(err, io.EOF) || !equalCommands(again, [][][]byte{args}) {
				t.Fatalf("%q written again reads %q, %v", args, again, err)
			}
		}
	})
}

// fitsInline reports whether args could have come from an inline line within its bound.
func fitsInline(args [][]byte) bool {
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	return n <= fuzzLimits.inline
}

func equalCommands(a, b [][][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y [][]byte) bool { return slices.EqualFunc(x, y, bytes.Equal) })
}

// readerSeeds are FuzzRESPReader's seed corpus: the bytes real clients sent to corral
// (captured through a recording proxy in front of `corral serve --api-token-file`), the
// attacks of issue 22, and the edges of each header.
func readerSeeds() []fuzzcorpus.Seed {
	seed := func(name, in string, step byte) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(in), step}}
	}
	fillgets := strings.Repeat("*3\r\n$7\r\nFILLGET\r\n$2\r\nj1\r\n$7\r\n3600000\r\n", 20)
	return []fuzzcorpus.Seed{
		// Real traffic: redis-cli 7.0.15, go-redis v9.23.0, Python redis 4.3.4.
		seed("redis-cli-ping", "*1\r\n$4\r\nPING\r\n", 6),
		seed("redis-cli-resp3-fillget", "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*5\r\n$7\r\nFILLGET\r\n$10\r\nproduct:42\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$2\r\n50\r\n", 6),
		seed("redis-cli-auth-set-ex", "*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nEX\r\n$2\r\n60\r\n", 6),
		seed("redis-cli-pipe", "SET a 1\nGET a\nFILLSET page:7 <h1>7</h1> 60000 0123456789abcdef\n\r\n*2\r\n$4\r\nECHO\r\n$20\r\n\xf4\xddA\x88\x99\x8b\xcd\xba\x1a\xfb\xe51\xbf\xf5\xb3\x14V\xcbl\xee\r\n", 6),
		seed("go-redis-v9", "*7\r\n$5\r\nhello\r\n$1\r\n3\r\n$4\r\nauth\r\n$7\r\ndefault\r\n$6\r\ns3cret\r\n$7\r\nsetname\r\n$3\r\napp\r\n*3\r\n$6\r\nclient\r\n$7\r\nsetname\r\n$3\r\napp\r\n*5\r\n$6\r\nclient\r\n$19\r\nmaint_notifications\r\n$2\r\non\r\n$20\r\nmoving-endpoint-type\r\n$11\r\ninternal-ip\r\n*4\r\n$6\r\nclient\r\n$7\r\nsetinfo\r\n$8\r\nLIB-NAME\r\n$19\r\ngo-redis(,go1.26.8)\r\n*4\r\n$6\r\nclient\r\n$7\r\nsetinfo\r\n$7\r\nLIB-VER\r\n$6\r\n9.23.0\r\n*1\r\n$4\r\nping\r\n*5\r\n$3\r\nset\r\n$7\r\nuser:42\r\n$5\r\nhello\r\n$2\r\nex\r\n$2\r\n60\r\n*2\r\n$3\r\nget\r\n$7\r\nuser:42\r\n*5\r\n$7\r\nFILLGET\r\n$6\r\npage:7\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$3\r\n200\r\n", 6),
		seed("go-redis-v9-pipeline", "*2\r\n$3\r\nget\r\n$1\r\na\r\n*2\r\n$3\r\nget\r\n$1\r\nb\r\n*3\r\n$3\r\ndel\r\n$1\r\na\r\n$1\r\nb\r\n", 6),
		seed("python-redis", "*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nPX\r\n$4\r\n1500\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$7\r\nFILLGET\r\n$6\r\npage:7\r\n$4\r\n5000\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nDEL\r\n$1\r\na\r\n", 6),
		seed("inline-ping", "PING\r\n", 6),
		seed("inline-tabs-and-spaces", "  SET\tk  v \r\n\r\n\n", 6),
		seed("inline-quotes", "SET greeting \"hello\\x20world\\n\" EX 60\r\nECHO 'it\\'s'\r\n", 6),
		seed("inline-unbalanced-quotes", "SET \"a b\r\nPING\r\n", 6),
		seed("inline-empty-name", "\"\" k\r\n", 6),
		// The attacks of issue 22.
		seed("length-2^63-1", "*1\r\n$9223372036854775807\r\n", 6),
		seed("count-2^40", "*1099511627776\r\n", 6),
		seed("byte-per-write", "*2\r\n$3\r\nGET\r\n$100000\r\n"+strings.Repeat("x", 300), 0),
		seed("fillget-pipeline", fillgets, 6),
		seed("length-4GiB", "*1\r\n$4294967296\r\n", 6),
		// Headers at and past their edges.
		seed("length-19-digits", "*1\r\n$1234567890123456789\r\n", 6),
		seed("length-18-digits", "*1\r\n$123456789012345678\r\n", 6),
		seed("count-negative", "*-1\r\n*-2\r\n", 6),
		seed("count-zero", "*0\r\n*1\r\n$4\r\nPING\r\n", 6),
		seed("count-plus", "*+1\r\n$4\r\nPING\r\n", 6),
		seed("count-space", "* 1\r\n$4\r\nPING\r\n", 6),
		seed("count-lf-only", "*1\n$4\r\nPING\r\n", 6),
		seed("count-over-args", "*17\r\n", 6),
		seed("over-args-dropped", "*17\r\n$4\r\nMGET\r\n"+strings.Repeat("$1\r\nk\r\n", 16)+"*1\r\n$4\r\nPING\r\n", 6),
		seed("over-args-past-command", "*700\r\n$4\r\nMGET\r\n"+strings.Repeat("$10\r\n0123456789\r\n", 699), 6),
		seed("count-past-command", "*683\r\n", 6),
		seed("mget", "*4\r\n$4\r\nMGET\r\n$1\r\na\r\n$0\r\n\r\n$1\r\na\r\n", 6),
		seed("length-negative", "*1\r\n$-1\r\n", 6),
		seed("length-leading-zeros", "*1\r\n$0004\r\nPING\r\n", 6),
		seed("length-past-command", "*2\r\n$3\r\nSET\r\n$4090\r\n", 6),
		seed("not-a-bulk", "*2\r\n$3\r\nGET\r\n:1\r\n", 6),
		seed("bulk-without-crlf", "*1\r\n$4\r\nPINGxx", 6),
		seed("bulk-cut-short", "*2\r\n$3\r\nGET\r\n$5\r\nab", 6),
		seed("empty-name", "*1\r\n$0\r\n\r\n", 6),
		seed("empty-arg", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", 6),
		seed("binary-arg", "*2\r\n$4\r\nECHO\r\n$4\r\n\x00\r\n\xff\r\n", 6),
		seed("header-too-long", "*"+strings.Repeat("0", 40)+"1\r\n", 6),
		seed("inline-too-long", strings.Repeat("A", 300)+"\r\n", 6),
		seed("inline-too-many-words", strings.Repeat("a ", 20)+"\r\n", 6),
		seed("budget", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4000\r\n"+strings.Repeat("v", 4000)+"\r\n", 6),
		seed("empty", "", 6),
	}
}
