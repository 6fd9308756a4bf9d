// Package peerpb holds the generated code of the corral peer protocol
// (peer.proto). Do not edit the .pb.go files; change peer.proto and run
//
//	go generate ./transport/...
//
// which needs protoc, protoc-gen-go and protoc-gen-go-grpc on PATH (see the
// transport package documentation for the versions).
package peerpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative peer.proto
