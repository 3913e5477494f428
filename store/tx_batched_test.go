package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestBeginBatchedFunc: a transaction whose BEGIN rides with its first
// batch is a transaction all the same: what fn wrote commits with it, or
// none of it when fn fails, whether it opened with a batch or a statement;
// a failing statement in the opening batch rolls the whole back and leaves
// the connection usable; the BEGIN's round trip is saved, whatever the
// opening statement (a batch, Exec, Query, QueryRow), except CopyFrom's.
func TestBeginBatchedFunc(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	begins := &beginCounter{}
	cfg.ConnConfig.Tracer = begins
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE public.bt (k text PRIMARY KEY)`)
	require.NoError(t, err)
	count := func(k string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM public.bt WHERE k = $1`, k).Scan(&n))
		return n
	}
	insert := func(keys ...string) *pgx.Batch {
		b := &pgx.Batch{}
		for _, k := range keys {
			b.Queue(`INSERT INTO public.bt (k) VALUES ($1)`, k)
		}
		return b
	}
	boom := errors.New("boom")

	// Opened by a batch, then a statement: both commit.
	var xid1, xid2 int64
	require.NoError(t, store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		b := insert("a")
		b.Queue(`SELECT pg_current_xact_id()::text::bigint`)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&xid1); err != nil {
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO public.bt (k) VALUES ('b')`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&xid2)
	}))
	require.Equal(t, xid1, xid2, "one transaction")
	require.Equal(t, 1, count("a"))
	require.Equal(t, 1, count("b"))

	// fn fails after the batch: nothing commits.
	err = store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.SendBatch(ctx, insert("c")).Close(); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, count("c"), "rolled back with the batch's BEGIN")

	// Opened by a statement: the same.
	err = store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO public.bt (k) VALUES ('d')`); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, count("d"))

	// A failing statement in the opening batch: the batch's first insert
	// is rolled back too, and the pool's connections still work.
	err = store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, insert("e", "a")).Close()
	})
	require.Error(t, err)
	require.Zero(t, count("e"))
	for i := range 3 {
		require.NoError(t, store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
			return tx.SendBatch(ctx, insert(fmt.Sprint("f", i))).Close()
		}))
	}
	require.Equal(t, 3, count("f0")+count("f1")+count("f2"))

	// Opened by a Query, then a QueryRow: one transaction, rows read
	// whole, and it commits.
	var xids []int64
	require.NoError(t, store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO public.bt (k) VALUES ('g1'), ('g2') RETURNING pg_current_xact_id()::text::bigint`)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		xids = append(xids, got...)
		var x int64
		if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&x); err != nil {
			return err
		}
		xids = append(xids, x)
		return nil
	}))
	require.Len(t, xids, 3)
	require.Equal(t, xids[0], xids[2], "one transaction")
	require.Equal(t, 1, count("g1"))
	require.Equal(t, 1, count("g2"))

	// Opened by a QueryRow that finds nothing: pgx.ErrNoRows, and the
	// transaction goes on.
	require.NoError(t, store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		var k string
		if err := tx.QueryRow(ctx, `SELECT k FROM public.bt WHERE k = 'nobody'`).Scan(&k); !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("want ErrNoRows, got %v", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO public.bt (k) VALUES ('h')`)
		return err
	}))
	require.Equal(t, 1, count("h"))

	// Opened by a failing Exec, QueryRow or Query: the error, nothing
	// commits, and the connections still work.
	for i, open := range []func(tx pgx.Tx) error{
		func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO public.bt (k) VALUES ('a')`)
			return err
		},
		func(tx pgx.Tx) error {
			var k string
			return tx.QueryRow(ctx, `INSERT INTO public.bt (k) VALUES ('a') RETURNING k`).Scan(&k)
		},
		func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `INSERT INTO public.bt (k) VALUES ('a') RETURNING k`)
			if err != nil {
				return err
			}
			_, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		},
	} {
		err := store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := open(tx); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO public.bt (k) VALUES ('i%d')`, i))
			return err
		})
		require.Error(t, err, "case %d", i)
		require.Zero(t, count(fmt.Sprint("i", i)))
	}
	for i := range 3 {
		require.NoError(t, store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO public.bt (k) VALUES ($1)`, fmt.Sprint("j", i))
			return err
		}))
	}
	require.Equal(t, 3, count("j0")+count("j1")+count("j2"))

	// Opened by CopyFrom: its BEGIN goes alone, and it commits.
	require.NoError(t, store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"public", "bt"}, []string{"k"}, pgx.CopyFromRows([][]any{{"k1"}}))
		return err
	}))
	require.Equal(t, 1, count("k1"))

	// A BEGIN sent on its own is a query of its own; one sent with the
	// opening statement, a batch or not, is not.
	require.Equal(t, int64(1), begins.Load(), "only the transaction opened by CopyFrom sent its BEGIN alone")
}

// beginCounter counts BEGINs sent as statements of their own.
type beginCounter struct{ atomic.Int64 }

func (c *beginCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(strings.TrimSpace(d.SQL), "begin") {
		c.Add(1)
	}
	return ctx
}

func (c *beginCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
