package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeMetrics serves /metrics alone on ln (rflow start --metrics-addr)
// until ctx ends: the metrics name workflows and wallets, so an operator
// can keep them on an address only the scraper reaches, away from the
// API's.
func ServeMetrics(ctx context.Context, ln net.Listener, metrics http.Handler, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, WriteTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	logger.InfoContext(ctx, "metrics listening", "addr", ln.Addr().String())
	return serveUntil(ctx, srv, ln, "metrics server", 5*time.Second)
}
