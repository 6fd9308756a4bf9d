package clip

// ReasonBytes is how much of an error's message Reason keeps.
const ReasonBytes = 200

// String returns s cut to its first n bytes, with "…" after them when it was longer.
func String(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Reason is err's message as a client is told it: its first ReasonBytes bytes.
func Reason(err error) string { return String(err.Error(), ReasonBytes) }
