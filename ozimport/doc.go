// Package ozimport converts an OpenZeppelin Monitor configuration
// (networks/, monitors/, triggers/ and filters/ of JSON files and scripts)
// into an rflow project: one network per EVM network, one contract per
// watched address with its ABI, and one workflow per (monitor, event
// condition, contract) whose event trigger carries the condition's
// expression translated to a where: and whose steps do what the monitor's
// triggers did. What has no rflow equivalent is never dropped silently:
// each such part is a Finding, written to IMPORT.md.
//
//	r, err := ozimport.Import("monitor/config", "my-project", ozimport.Options{})
//	if left := r.LeftOut(); len(left) > 0 { … }
package ozimport
