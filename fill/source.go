package fill

// Source says how a Get was answered.
type Source uint8

const (
	SourceHit       Source = iota + 1 // a fresh stored value
	SourceFill                        // this Get ran the loader
	SourceCoalesced                   // this Get waited on a fill another Get started
	SourceStale                       // a stale value, within grace; a refresh was started or is running
)

func (s Source) String() string {
	switch s {
	case SourceHit:
		return "hit"
	case SourceFill:
		return "fill"
	case SourceCoalesced:
		return "coalesced"
	case SourceStale:
		return "stale"
	}
	return "unknown"
}
