package anviltest

import "syscall"

// Freeze stops the node with SIGSTOP: its port still accepts connections
// (the kernel queues them) but nothing answers, like a hung node behind a
// live load balancer. Thaw resumes it; Stop kills a frozen node too.
func (n *Node) Freeze() {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		n.t.Fatalf("freeze anvil: %v", err)
	}
}

// Thaw resumes a frozen node (SIGCONT).
func (n *Node) Thaw() {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		n.t.Fatalf("thaw anvil: %v", err)
	}
}
