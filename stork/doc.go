// Package stork reads Stork submit files, so that the jobs and
// estimations written for Stork run on Sluice (`sluice submit -f`). Stork
// submit files (Yin, Yildirim et al., "A Data Throughput Prediction and
// Optimization Service for Widely Distributed Many-Task Computing", §3)
// are Condor ClassAds:
//
//	[
//	dap_type = "transfer";
//	src_url = "gsiftp://eric1.loni.org/default/scratch/test.dat";
//	dest_url = "gsiftp://qbl1.loni.org/default/scratch/dest.dat";
//	optimization = "YES";
//	arguments = "-b 128K -s 10M";
//	]
//
// The package owns the parser of the subset Stork data-placement jobs use
// (Parse): one or more ads of `name = value;` attributes, values quoted
// strings, numbers or barewords (TRUE/FALSE), comments starting with //
// or #. Attribute names are case-insensitive, as in ClassAds. A full
// ClassAd expression language is not needed for these files and no Go
// library implements one.
//
// It also owns the reading of one ad into what Sluice does for it (Check):
// a transfer job (wire.JobIn) or an estimation (wire.EstimateIn), with
// notes on what the ad asks for that Sluice does not do. It asks the
// service nothing; the command submits the jobs and asks for the
// estimates. ParseSize, the byte counts of submit files, also reads the
// command line's size flags.
package stork
