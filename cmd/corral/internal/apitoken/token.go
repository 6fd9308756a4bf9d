package apitoken

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"os"
	"strings"
)

// Token is the API token, kept as its SHA-256 so that a comparison takes the same time
// whatever the length or the content of what a client sent. It is never logged.
type Token struct{ sum [sha256.Size]byte }

// New returns the token secret. It refuses an empty secret, which every request would carry.
func New(secret string) (*Token, error) {
	if secret == "" {
		return nil, errors.New("empty token")
	}
	return &Token{sum: sha256.Sum256([]byte(secret))}, nil
}

// Load reads a token from the file at path: its content without the white space around it
// (editors and `echo` add a newline). It refuses a file that holds nothing else.
func Load(path string) (*Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, errors.New("the file is empty")
	}
	return New(tok)
}

// Matches reports, in constant time, whether s is the token.
func (t *Token) Matches(s string) bool {
	sum := sha256.Sum256([]byte(s))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

// Bearer reports whether an Authorization header carries the token: "Bearer", in any case,
// a space, and the token, with white space around it allowed.
func (t *Token) Bearer(header string) bool {
	scheme, cred, ok := strings.Cut(header, " ")
	return ok && strings.EqualFold(scheme, "Bearer") && t.Matches(strings.TrimSpace(cred))
}
