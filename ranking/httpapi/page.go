package httpapi

import (
	"bytes"
	_ "embed"
)

// page is the built-in HTML page: plain HTML and fetch, no build step. It
// lists the boards from /v1/boards and shows the top 20 of the chosen board,
// dims and period with trend arrows (/top?trend=1), refreshed every 2 s.
// For a board with dims it offers a picker of the dims values that have
// members in the period (/dims, up to 500 values); the Dims box takes any.
//
//go:embed page.html
var page []byte

func pageReader() *bytes.Reader { return bytes.NewReader(page) }
