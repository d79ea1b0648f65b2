package emerald

// The Go in pb is generated from proto by protoc (on PATH; Debian's
// protobuf-compiler) with protoc-gen-go and protoc-gen-go-grpc at the
// versions pinned in generate.sh. The output is committed.
//go:generate sh generate.sh
