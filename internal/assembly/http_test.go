package assembly

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestRequestError: a request fasthttp could not read is answered in the
// API's JSON error format, with the status of what went wrong.
func TestRequestError(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"headers too large", &fasthttp.ErrSmallBuffer{}, `431 {"error":"request line and headers exceed http.max_header_bytes","code":"headers_too_large"}`},
		{"body", fmt.Errorf("reading: %w", fasthttp.ErrBodyTooLarge), `413 {"error":"request bodies are not accepted","code":"body_not_allowed"}`},
		{"timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, `408 {"error":"the request did not arrive in time","code":"request_timeout"}`},
		{"malformed", errors.New("cannot parse request line"), `400 {"error":"malformed HTTP request","code":"bad_request"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Response.Header.Set("X-Left", "over")
			requestError(&ctx, tt.err)
			got := fmt.Sprintf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			if got != tt.want+"\n" {
				t.Errorf("got %q, want %q", got, tt.want+"\n")
			}
			if ct := string(ctx.Response.Header.ContentType()); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if x := ctx.Response.Header.Peek("X-Left"); len(x) != 0 {
				t.Errorf("a header set before the error survived: X-Left %q", x)
			}
		})
	}
}
