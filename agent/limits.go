package agent

// maxHeaderBytes bounds a request's line and header. Go's default, 1 MiB,
// let each unauthenticated connection that sends a header slowly hold up
// to 1 MiB until ReadHeaderTimeout: 300 of them took the agent from 34 to
// 354 MiB. Its largest legitimate request fits in well under this: a
// path of up to PATH_MAX (4096) bytes, every byte percent-encoded (12 KiB
// in the request line), a data token of at most 8 KiB (auth's bound), the
// fence, Range and the usual few headers.
const maxHeaderBytes = 32 << 10
