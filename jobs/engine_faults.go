package jobs

// Fault points of the engine, where crash tests kill the process (see
// package fault). They mark the windows the reliability contract talks
// about.
const (
	FaultAfterClaim   = "after-claim"          // a run and its first job are committed
	FaultAfterJournal = "after-journal"        // a step's row is durable, its effect not yet made
	FaultAfterEffect  = "after-effect"         // the effect happened, its outcome not yet committed
	FaultAfterOutcome = "after-outcome"        // a step's outcome and successor are committed, its job not yet completed
	FaultMidForeach   = "mid-foreach"          // a foreach item's outcome is committed, others pending
	FaultAfterReserve = "budget.after-reserve" // a send's budget reservation is written, the relayer not yet called
	// FaultBeforeResimulate: an approval is decided and committed, the
	// approved send not yet re-simulated nor handed to the relayer.
	FaultBeforeResimulate = "approval.before-resimulate"
	// FaultAfterWaitSettle: a wait's match and its run's next step are
	// written, the feed's transaction not yet committed.
	FaultAfterWaitSettle = "wait.after-settle"
)
