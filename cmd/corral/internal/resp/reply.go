package resp

import (
	"strconv"
	"strings"
)

// Replies. A simple string or an error never holds a line break: one from the client's
// bytes (an unknown command's name) becomes a space.

func (c *conn) writeString(s string) {
	c.w.WriteByte('+')
	c.w.WriteString(oneLine(s))
	c.w.WriteString("\r\n")
}

func (c *conn) writeError(s string) {
	c.w.WriteByte('-')
	c.w.WriteString(oneLine(s))
	c.w.WriteString("\r\n")
}

func (c *conn) writeBulk(b []byte) {
	// The header is appended into the writer's free space: strconv.Itoa allocates for a
	// length of 100 or more.
	c.w.Write(appendBulkHeader(c.w.AvailableBuffer(), len(b)))
	c.w.Write(b)
	c.w.WriteString("\r\n")
}

// appendBulkHeader appends the header of a bulk string of n bytes to dst.
func appendBulkHeader(dst []byte, n int) []byte {
	dst = strconv.AppendInt(append(dst, '$'), int64(n), 10)
	return append(dst, '\r', '\n')
}

func (c *conn) writeBulkString(s string) { c.writeBulk([]byte(s)) }

func (c *conn) writeInt(n int64) {
	c.w.WriteByte(':')
	c.w.WriteString(strconv.FormatInt(n, 10))
	c.w.WriteString("\r\n")
}

func (c *conn) writeArray(n int) {
	c.w.WriteByte('*')
	c.w.WriteString(strconv.Itoa(n))
	c.w.WriteString("\r\n")
}

// null writes RESP3's null, or RESP2's null bulk string.
func (c *conn) null() {
	if c.proto == 3 {
		c.w.WriteString("_\r\n")
		return
	}
	c.w.WriteString("$-1\r\n")
}

// mapHeader starts a map of n pairs: a RESP3 map, or a flat array of 2n in RESP2.
func (c *conn) mapHeader(n int) {
	if c.proto == 3 {
		c.w.WriteString("%" + strconv.Itoa(n) + "\r\n")
		return
	}
	c.writeArray(2 * n)
}

func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}
