package resp

import (
	"bytes"
	"errors"
)

// The inline form: a command typed as a line (SET greeting "hello world"\r\n), as a person at
// a terminal or a script with nc sends it. Redis splits the line with sdssplitargs, and so
// does splitInline, to the byte:
//
//   - Arguments are separated by blanks; blanks before and after them are skipped (space,
//     \t, \n, \r, and before an argument \v and \f too, C's isspace).
//   - In double quotes, \n \r \t \b \a stand for their control characters, \xHH for the byte
//     of two hex digits, and a backslash before any other byte for that byte (\" and \\
//     included).
//   - In single quotes every byte stands for itself but \', which is a quote.
//   - Quotes may begin within an argument (a"b c" is one argument, ab c); a closing quote
//     must be followed by a blank or the end of the line.
//   - A quote left open, or a closing quote followed by anything else, is an error: Redis
//     answers "-ERR Protocol error: unbalanced quotes in request" and closes the connection.
//   - The line is read as a C string: a NUL byte ends it.

// errUnbalancedQuotes is Redis's own error for a line that sdssplitargs refuses.
var errUnbalancedQuotes = errors.New("unbalanced quotes in request")

// errTooManyInlineArgs is a line with more than the bound of arguments.
var errTooManyInlineArgs = errors.New("too many arguments")

// splitInline splits line, an inline command without its line end, into at most maxArgs
// arguments, as Redis's sdssplitargs does (see above); past maxArgs, it returns the first
// maxArgs with errTooManyInlineArgs. Each argument is a slice of its own,
// of its length (line may be the reader's buffer, and a stored value keeps its slice).
func splitInline(line []byte, maxArgs int) ([][]byte, error) {
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	var args [][]byte
	// An argument is never longer than the line: each is built here, then copied out.
	scratch := make([]byte, 0, len(line))
	i := 0
	for {
		for i < len(line) && isCSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return args, nil
		}
		if len(args) == maxArgs {
			return args, errTooManyInlineArgs
		}
		arg := scratch[:0]
		var quote byte // '"' or '\'' while in quotes
	token:
		for {
			if quote == 0 {
				if i == len(line) {
					break token
				}
				switch c := line[i]; c {
				case ' ', '\n', '\r', '\t':
					i++
					break token
				case '"', '\'':
					quote = c
				default:
					arg = append(arg, c)
				}
				i++
				continue
			}
			switch {
			case i == len(line):
				return nil, errUnbalancedQuotes
			case quote == '"' && line[i] == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
				arg = append(arg, unhex(line[i+2])<<4|unhex(line[i+3]))
				i += 4
			case quote == '"' && line[i] == '\\' && i+1 < len(line):
				arg = append(arg, unescape(line[i+1]))
				i += 2
			case quote == '\'' && line[i] == '\\' && i+1 < len(line) && line[i+1] == '\'':
				arg = append(arg, '\'')
				i += 2
			case line[i] == quote:
				// A closing quote must end the argument.
				if i+1 < len(line) && !isCSpace(line[i+1]) {
					return nil, errUnbalancedQuotes
				}
				i++
				break token
			default:
				arg = append(arg, line[i])
				i++
			}
		}
		args = append(args, append(make([]byte, 0, len(arg)), arg...))
	}
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unhex is the value of a hex digit (isHex).
func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unescape is the byte a backslash and c stand for in double quotes.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
