// Package clip bounds what corral serve quotes back to a client: a name the client sent, in
// an error about it, or the message of an error that ended its request. A message that
// repeated them whole would be as large as a request, and a request is the client's to make.
//
// # Usage
//
//	msg := fmt.Sprintf("ERR unknown command '%s'", clip.String(name, 64))
//	http.Error(w, "origin: "+clip.Reason(err), http.StatusBadGateway)
//
// The caller chooses n for String; Reason keeps ReasonBytes. Both cut at a byte count, so a
// cut may fall inside a UTF-8 sequence: the quote is for a person reading a log or a reply,
// not for parsing.
package clip
