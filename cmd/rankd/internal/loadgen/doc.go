// Package loadgen is the HTTP load generator of `rankd bench`'s reads
// phase. It runs in a child process, apart from the rankd it measures, so
// that the clients' CPU is neither taken from rankd nor counted in rankd's.
//
// The child is this same executable started again with the environment
// variable RANKD_LOADGEN=1, whose main calls Child first (as for the
// broker of package servers). It opens one keep-alive HTTP/1.1 connection
// per client and runs every client in a closed loop: send a GET, read the
// whole response, send the next. Requests are written from pre-built
// bytes and responses read with a minimal parser (status line,
// Content-Length, Connection), so a request costs the generator a few
// microseconds and two system calls; responses must carry Content-Length
// (rankd's do).
//
// The parent talks to the child over its stdin and stdout, one line each:
// the settings (JSON), then "ready" once every client has a connection and
// one answer, "start" and "stop" to open and close the measured window,
// and the result (JSON) once the clients have stopped.
package loadgen
