package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/rankd/rankd/cmd/rankd/internal/cli"
	"github.com/rankd/rankd/internal/assembly"
	"github.com/spf13/pflag"
)

const healthcheckHelp = `
GET --url and exit 0 when it answers 2xx, 1 otherwise (printing why). Meant
for health checks of images without a shell or curl (distroless):

  healthcheck: {test: ["CMD", "/rankd", "healthcheck", "--url", "http://127.0.0.1:8080/readyz"]}`

// healthcheckSpec is `rankd healthcheck`.
var healthcheckSpec = cli.Spec{Use: "healthcheck [--url URL] [--timeout D]", Short: "GET a URL; exit 0 on a 2xx answer (for distroless images)", Long: healthcheckHelp, Flags: healthcheckFlags}

func healthcheckFlags(fs *pflag.FlagSet) cli.RunFunc {
	rawURL := fs.String("url", "http://127.0.0.1:8080/readyz", "`URL` to GET (/readyz: group joined and Redis answering; /healthz: alive)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		// A malformed URL is a usage error (exit 2), not a failed check (1).
		u, err := url.Parse(*rawURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cli.Usagef("--url %q: want an absolute http:// or https:// URL", *rawURL)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		status, err := assembly.Probe(ctx, *rawURL) // parsed above: the request cannot fail to build
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %s\n", *rawURL, status)
		return nil
	}
}
