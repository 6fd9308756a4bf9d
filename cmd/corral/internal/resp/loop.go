package resp

// What an event loop answers itself (loop_linux.go): a GET of a key this node holds fresh as
// its owner, sent as a whole multibulk array. parseCommand and answerAtOnce decide it, and
// they are strict: anything they do not take whole and answer as the connection's goroutine
// would goes to that goroutine, whose reader and commands give every other answer.

// handBackAfter is how many GETs in a row a connection's goroutine answers as the loop
// would before the connection goes back to its loop.
const handBackAfter = 16

// maxLoopArgs is the most arguments of a command parseCommand takes (GET has 2).
const maxLoopArgs = 3

// parseCommand parses the command at the start of b when it is a whole multibulk array of
// at most maxLoopArgs bulk strings, each length a few plain digits, the first not empty, and
// returns its arguments (slices of b, appended to args) and its bytes. It returns 0 bytes for
// anything else — a command not yet whole, an inline command, a longer or malformed one — which is
// left to the goroutine's reader.
func parseCommand(b []byte, args [][]byte) ([][]byte, int) {
	count, p, ok := headerAt(b, 0, '*')
	if !ok || count < 1 || count > maxLoopArgs {
		return args, 0
	}
	for i := range count {
		n, q, ok := headerAt(b, p, '$')
		if !ok || i == 0 && n == 0 || n > len(b)-q-2 || b[q+n] != '\r' || b[q+n+1] != '\n' {
			return args, 0
		}
		args = append(args, b[q:q+n:q+n])
		p = q + n + 2
	}
	return args, p
}

// headerAt parses "<kind><digits>\r\n" at b[at:]: 1 to 9 digits, no sign. It returns the
// number and where the line ends.
func headerAt(b []byte, at int, kind byte) (n, end int, ok bool) {
	if at >= len(b) || b[at] != kind {
		return 0, 0, false
	}
	i := at + 1
	for ; i < len(b) && i-at <= 10 && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int(b[i]-'0')
	}
	digits := i - at - 1
	if digits < 1 || digits > 9 || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	return n, i + 2, true
}

// answerAtOnce appends to out the reply of the command args on c when it is a GET that
// serveCommand would answer at once with a value this node holds fresh (as the key's owner,
// or a near copy of a key owned elsewhere: Group.GetIfHeld),
// and reports whether it did; it does nothing else otherwise.
func (s *Server) answerAtOnce(c *conn, args [][]byte, out []byte) ([]byte, bool) {
	if len(args) != 2 || !isGet(args[0]) {
		return out, false
	}
	if s.cfg.Token != nil && !c.authed && s.needsAuth("get") {
		return out, false
	}
	key := s.keys.Of(args[1])
	if s.cfg.Origin != nil && s.cfg.Origin.Check(s.cfg.Group.Name(), key) != nil {
		return out, false
	}
	v, _, ok := s.cfg.Group.GetIfHeld(s.ctx, key) // the owner's value, or a near copy
	if !ok {
		return out, false
	}
	out = append(appendBulkHeader(out, len(v.Body)), v.Body...)
	return append(out, '\r', '\n'), true
}

// isGet reports whether name is GET, in any case.
func isGet(name []byte) bool {
	return len(name) == 3 && name[0]|0x20 == 'g' && name[1]|0x20 == 'e' && name[2]|0x20 == 't'
}
