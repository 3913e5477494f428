// Package units shows amounts the way a person reads them: in the asset's
// unit (ETH, USDC) with the raw integer the chain holds beside it,
// "0.0292 ETH (29200000000000000 wei)". Every place rflow shows an amount
// to a person (the live view, the CLI's tables, the console, approval
// notices) formats it here, so one amount reads the same everywhere.
//
// Formatting is exact: values are big integers scaled by 10^decimals in
// text, never through a float, so 10^30 wei and 1 wei both print every
// digit they have. Machine outputs (-o json, API bodies) keep their raw
// integer fields; the text this package makes is for display.
package units
