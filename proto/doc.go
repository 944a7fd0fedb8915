// Package apronpb holds the protobuf messages of Apron's own wire and disk
// formats. apron.pb.go is generated from apron.proto and committed; rerun
// `go generate ./proto` (needs protoc and protoc-gen-go) after editing the
// .proto file.
package apronpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative apron.proto
