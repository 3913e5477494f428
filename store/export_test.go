package store

import "context"

// Drop closes a node's liveness connection without a clean goodbye, as a
// killed process would.
func (n *Node) Drop() { n.conn.Close(context.Background()) }
