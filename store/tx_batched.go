package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BeginBatchedFunc runs fn in a transaction as pgx.BeginFunc does, except
// that the BEGIN is sent with the transaction's first statement (a batch,
// Exec, Query or QueryRow) in one request, instead of in a round trip of
// its own: a step's outcome transaction opens with its outcome batch
// (Writes.Send), a parked step's with its job's completion. One round trip
// fewer a transaction. CopyFrom and Prepare send the BEGIN first, as pgx
// does. Nested transactions (savepoints) are not supported.
func BeginBatchedFunc(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	// A connection left inside a transaction (a failed rollback) is
	// destroyed by Release, not returned to the pool.
	defer c.Release()
	tx := &batchedTx{conn: c.Conn()}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// batchedTx is the pgx.Tx of BeginBatchedFunc.
type batchedTx struct {
	conn  *pgx.Conn
	begun bool
}

var errNested = errors.New("nested transactions are not supported here")

func (t *batchedTx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "begin"); err != nil {
		return err
	}
	t.begun = true
	return nil
}

func (t *batchedTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNested }

func (t *batchedTx) Commit(ctx context.Context) error {
	if !t.begun {
		return nil // nothing was sent
	}
	t.begun = false
	tag, err := t.conn.Exec(ctx, "commit")
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *batchedTx) Rollback(ctx context.Context) error {
	if !t.begun {
		return nil
	}
	t.begun = false
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

func (t *batchedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	t.begun = true
	withBegin := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	withBegin.Queue("begin")
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	return &afterBegin{BatchResults: t.conn.SendBatch(ctx, withBegin)}
}

func (t *batchedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *batchedTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *batchedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t *batchedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	br := t.withBegin(ctx, sql, args)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *batchedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun {
		return t.conn.Query(ctx, sql, args...)
	}
	br := t.withBegin(ctx, sql, args)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *batchedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

// withBegin sends sql as the transaction's first statement, its BEGIN
// before it in the same request.
func (t *batchedTx) withBegin(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.SendBatch(ctx, b)
}

// batchRows is the rows of a transaction's first statement, sent with its
// BEGIN: closing them ends the request too.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is the pgx.Row of rows, as pgx's QueryRow makes it: the first
// row scanned, pgx.ErrNoRows if there is none, the rows closed.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

func (t *batchedTx) Conn() *pgx.Conn { return t.conn }

// afterBegin is the results of a batch sent with a BEGIN before it: the
// BEGIN's result is read before the caller's first.
type afterBegin struct {
	pgx.BatchResults
	read bool
	err  error
}

func (r *afterBegin) skip() error {
	if !r.read {
		r.read = true
		_, r.err = r.BatchResults.Exec()
	}
	return r.err
}

func (r *afterBegin) Exec() (pgconn.CommandTag, error) {
	if err := r.skip(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.BatchResults.Exec()
}

func (r *afterBegin) Query() (pgx.Rows, error) {
	if err := r.skip(); err != nil {
		return nil, err
	}
	return r.BatchResults.Query()
}

func (r *afterBegin) QueryRow() pgx.Row {
	if err := r.skip(); err != nil {
		return errRow{err}
	}
	return r.BatchResults.QueryRow()
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
