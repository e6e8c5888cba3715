package httpapi

import (
	"bytes"
	_ "embed"
)

// page is the built-in HTML page: plain HTML and fetch, no build step. It
// lists the boards from /v1/boards and shows the top 20 of the chosen board,
// dims and period with trend arrows (/top?trend=1), refreshed every 2 s.
//
//go:embed page.html
var page []byte

func pageReader() *bytes.Reader { return bytes.NewReader(page) }
