package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statement is one query as a pool sent it: its SQL and arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Recorder is a pgx tracer that keeps the statements a pool sends, so a
// test can EXPLAIN exactly what the code under test asked for rather than
// a copy of its SQL. Set it as the pool's ConnConfig.Tracer.
type Recorder struct {
	mu    sync.Mutex
	stmts []Statement
}

// TraceQueryStart records the statement.
func (r *Recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, Statement{SQL: data.SQL, Args: data.Args})
	return ctx
}

// TraceQueryEnd is a no-op: only the statements matter.
func (r *Recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Take returns the statements recorded since the last Take.
func (r *Recorder) Take() []Statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stmts
	r.stmts = nil
	return s
}

// Explain runs s under EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) with the
// planner's generic plan forced, or its custom plan (the two a prepared
// statement can get: pgx's switch to the generic one after five
// executions), and returns the plan's lines. s is prepared and run with
// EXPLAIN EXECUTE, its arguments as literals: an EXPLAIN sent with
// parameters of its own is planned for their values, always custom.
func Explain(ctx context.Context, pool *pgxpool.Pool, s Statement, generic bool) ([]string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	const name = "storetest_explain"
	desc, err := conn.Conn().Prepare(ctx, name, s.SQL)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", strings.Join(strings.Fields(s.SQL), " "), err)
	}
	defer conn.Conn().Deallocate(ctx, name)
	lits := make([]string, len(s.Args))
	for i, arg := range s.Args {
		var typ string
		if err := conn.QueryRow(ctx, `SELECT format_type($1, NULL)`, desc.ParamOIDs[i]).Scan(&typ); err != nil {
			return nil, err
		}
		var lit string
		if err := conn.QueryRow(ctx, `SELECT quote_literal($1::`+typ+`::text)`, arg).Scan(&lit); err != nil {
			return nil, fmt.Errorf("argument $%d (%s): %w", i+1, typ, err)
		}
		lits[i] = lit + "::" + typ
	}
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
		return nil, err
	}
	defer conn.Exec(ctx, `RESET plan_cache_mode`)
	q := `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) EXECUTE ` + name
	if len(lits) > 0 {
		q += "(" + strings.Join(lits, ", ") + ")"
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("explain %s: %w", strings.Join(strings.Fields(s.SQL), " "), err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
