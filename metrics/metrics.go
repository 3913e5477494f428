// Package metrics is rflow's Prometheus instrumentation: counters and
// histograms the engine feeds in memory (it implements jobs.Observer) and
// gauges read from the database at scrape time, cached briefly. Every
// series is documented in docs/operations.md. Each Metrics has its own
// registry: nothing is registered globally.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// DefaultCacheTTL is how long one database snapshot serves scrapes: two
// Prometheus servers scraping every few seconds cost one set of queries.
const DefaultCacheTTL = 5 * time.Second

// scrapeTimeout bounds the database queries of one scrape.
const scrapeTimeout = 5 * time.Second

// Config configures Metrics.
type Config struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Namespace is the project the database gauges count (runs, the dead
	// letter queue), under its local workflow names.
	Namespace store.Namespace
	// CacheTTL is how long a database snapshot is reused (DefaultCacheTTL
	// when zero).
	CacheTTL time.Duration
}

// Metrics holds one process's series.
type Metrics struct {
	reg *prometheus.Registry

	claims       *prometheus.CounterVec
	stepDuration *prometheus.HistogramVec
	runsFinished *prometheus.CounterVec
	runsRepaired *prometheus.CounterVec
}

var _ jobs.Observer = (*Metrics)(nil)

// New builds the registry: Go runtime and process collectors, the engine's
// counters and the database collector.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.claims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rflow_claims_total",
		Help: "Runs created by the claim gate in this process, by workflow and trigger kind.",
	}, []string{"workflow", "trigger"})
	m.stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rflow_step_duration_seconds",
		Help:    "Duration of side-effecting step attempts worked by this process, by step kind and outcome.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
	}, []string{"kind", "status"})
	m.runsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rflow_runs_finished_total",
		Help: "Runs that ended in this process, by workflow and final status (completed, failed).",
	}, []string{"workflow", "status"})
	m.runsRepaired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rflow_runs_repaired_total",
		Help: "Pending steps whose River job was gone (deleted, lost in a restore) and that this process enqueued again, by workflow.",
	}, []string{"workflow"})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.claims, m.stepDuration, m.runsFinished, m.runsRepaired,
	)
	if cfg.Pool != nil {
		m.reg.MustRegister(newDBCollector(cfg))
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the registry, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// RunsClaimed implements jobs.Observer.
func (m *Metrics) RunsClaimed(workflow, kind string, n int) {
	m.claims.WithLabelValues(workflow, kind).Add(float64(n))
}

// StepFinished implements jobs.Observer.
func (m *Metrics) StepFinished(kind, status string, d time.Duration) {
	m.stepDuration.WithLabelValues(kind, status).Observe(d.Seconds())
}

// RunFinished implements jobs.Observer.
func (m *Metrics) RunFinished(workflow, status string) {
	m.runsFinished.WithLabelValues(workflow, status).Inc()
}

// RunRepaired implements jobs.Observer.
func (m *Metrics) RunRepaired(workflow string) {
	m.runsRepaired.WithLabelValues(workflow).Inc()
}

// dbCollector reports the aggregate gauges from one store.ReadGauges
// snapshot, taken at most once per TTL whatever the number of scrapers.
type dbCollector struct {
	pool   *pgxpool.Pool
	ns     store.Namespace
	logger *slog.Logger
	ttl    time.Duration

	runs, dlq, jobs, txs, gaps, lagBlocks, lagSeconds, up *prometheus.Desc
	waitLagBlocks, waitLagSeconds                         *prometheus.Desc
	headAge, headBlock, nodeHead, pollAge, blockTime      *prometheus.Desc

	mu    sync.Mutex
	taken time.Time
	last  *store.Gauges
}

func newDBCollector(cfg Config) *dbCollector {
	c := &dbCollector{pool: cfg.Pool, ns: cfg.Namespace, logger: cfg.Logger, ttl: cfg.CacheTTL}
	if c.ttl <= 0 {
		c.ttl = DefaultCacheTTL
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.runs = prometheus.NewDesc("rflow_runs", "Unfinished runs by workflow and status (queued, running, waiting_delay, waiting_tx; the waiting ones are parked).", []string{"workflow", "status"}, nil)
	c.dlq = prometheus.NewDesc("rflow_dead_letter_runs", "Failed runs kept in the dead letter queue, by workflow.", []string{"workflow"}, nil)
	c.jobs = prometheus.NewDesc("rflow_river_jobs", "River jobs not yet finished, by queue and state.", []string{"queue", "state"}, nil)
	c.txs = prometheus.NewDesc("rflow_relayer_transactions", "Relayer transactions in flight, by wallet, chain id and status.", []string{"wallet", "chain_id", "status"}, nil)
	c.gaps = prometheus.NewDesc("rflow_relayer_nonce_gaps", "Nonces below the highest in flight that no live or confirmed transaction holds, by address and chain id.", []string{"address", "chain_id"}, nil)
	c.lagBlocks = prometheus.NewDesc("rflow_trigger_lag_blocks", "Blocks between a chain trigger's cursor and its network's head (the newest block the window or the node knows), by workflow, trigger kind and phase.", []string{"workflow", "trigger", "phase", "chain_id"}, nil)
	c.lagSeconds = prometheus.NewDesc("rflow_trigger_lag_seconds", "How long the oldest block a chain trigger has not claimed has been seen (0 at the head).", []string{"workflow", "trigger", "phase", "chain_id"}, nil)
	wait := []string{"chain_id", "address", "topic"}
	c.waitLagBlocks = prometheus.NewDesc("rflow_wait_feed_lag_blocks", "Blocks between a wait_for feed's cursor and its network's head (the newest block the window or the node knows), by chain id, contract address (any) and event topic.", wait, nil)
	c.waitLagSeconds = prometheus.NewDesc("rflow_wait_feed_lag_seconds", "How long the oldest block a wait_for feed has not read has been seen (0 at the head).", wait, nil)
	net := []string{"network", "chain_id"}
	c.headAge = prometheus.NewDesc("rflow_chain_head_age_seconds", "Time since rflow's window of the network last gained a block: grows when the node stops answering, stops advancing, or the head tracker falls behind it.", net, nil)
	c.headBlock = prometheus.NewDesc("rflow_chain_head_block", "The newest block of the network's window.", net, nil)
	c.nodeHead = prometheus.NewDesc("rflow_chain_node_head_block", "The newest block the network's node reported at the head tracker's last answered poll.", net, nil)
	c.pollAge = prometheus.NewDesc("rflow_chain_head_poll_age_seconds", "Time since the network's node last answered the head tracker's poll.", net, nil)
	c.blockTime = prometheus.NewDesc("rflow_chain_block_time_seconds", "The network's observed time per block (a moving average of its block timestamps).", net, nil)
	c.up = prometheus.NewDesc("rflow_database_up", "1 when the last metrics snapshot could be read from the database, else 0.", nil, nil)
	return c
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.runs, c.dlq, c.jobs, c.txs, c.gaps, c.lagBlocks, c.lagSeconds, c.up,
		c.waitLagBlocks, c.waitLagSeconds, c.headAge, c.headBlock, c.nodeHead, c.pollAge, c.blockTime} {
		ch <- d
	}
}

func (c *dbCollector) snapshot() (*store.Gauges, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.taken) < c.ttl {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	g, err := store.ReadGauges(ctx, c.pool, c.ns)
	if err != nil {
		return nil, err
	}
	c.last, c.taken = g, time.Now()
	return g, nil
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	g, err := c.snapshot()
	if err != nil {
		c.logger.Warn("metrics: database snapshot failed", "err", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	counts := func(d *prometheus.Desc, rows []store.LabeledCount) {
		for _, r := range rows {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(r.Count), r.Labels...)
		}
	}
	counts(c.runs, g.Runs)
	counts(c.dlq, g.Failed)
	counts(c.jobs, g.Jobs)
	counts(c.txs, g.Transactions)
	for _, n := range g.NonceGaps {
		ch <- prometheus.MustNewConstMetric(c.gaps, prometheus.GaugeValue, float64(n.Gaps), n.Address, itoa(n.ChainID))
	}
	for _, l := range g.Cursors {
		c.collectCursor(ch, l)
	}
	for _, h := range g.Heads {
		if h.Holder == "" {
			// Released: no trigger reads the network any more (or every
			// process stopped cleanly). An expired lease keeps its owner:
			// a dead tracker still shows.
			continue
		}
		labels := []string{h.Network, itoa(h.ChainID)}
		if h.Window >= 0 {
			ch <- prometheus.MustNewConstMetric(c.headAge, prometheus.GaugeValue, h.WindowAge.Seconds(), labels...)
			ch <- prometheus.MustNewConstMetric(c.headBlock, prometheus.GaugeValue, float64(h.Window), labels...)
		}
		if h.Polled {
			ch <- prometheus.MustNewConstMetric(c.nodeHead, prometheus.GaugeValue, float64(h.NodeHead), labels...)
			ch <- prometheus.MustNewConstMetric(c.pollAge, prometheus.GaugeValue, h.PollAge.Seconds(), labels...)
		}
		if h.BlockTime > 0 {
			ch <- prometheus.MustNewConstMetric(c.blockTime, prometheus.GaugeValue, h.BlockTime.Seconds(), labels...)
		}
	}
}

// collectCursor reports one cursor's lag: a wait feed's
// (wait/<chain id>/<address|any>/<topic>) under its own series, a
// trigger's (<kind>/<workflow>) under the trigger series. Only the
// project's own cursors count, under its local names: another project's
// wait feeds are <project>.wait/…, its triggers' workflows <project>.<name>.
func (c *dbCollector) collectCursor(ch chan<- prometheus.Metric, l store.CursorLag) {
	blocks, behind := float64(max(l.Head-l.Block, 0)), l.Behind.Seconds()
	if rest, ok := strings.CutPrefix(l.Task, c.ns.Qualify("wait/")); ok {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) != 3 {
			return
		}
		ch <- prometheus.MustNewConstMetric(c.waitLagBlocks, prometheus.GaugeValue, blocks, parts...)
		ch <- prometheus.MustNewConstMetric(c.waitLagSeconds, prometheus.GaugeValue, behind, parts...)
		return
	}
	kind, rest, ok := strings.Cut(l.Task, "/")
	if !ok || strings.Contains(kind, ".") || kind == "wait" {
		return // another project's wait feed
	}
	workflow, ok := c.ns.Local(rest)
	if !ok {
		return
	}
	labels := []string{workflow, kind, l.Phase, itoa(l.ChainID)}
	ch <- prometheus.MustNewConstMetric(c.lagBlocks, prometheus.GaugeValue, blocks, labels...)
	ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, behind, labels...)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
