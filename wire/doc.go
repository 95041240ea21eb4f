// Package wire owns the JSON documents of Sluice's HTTP API that clients,
// agents and the server share: what requests carry and answers hold (jobs
// and their files, endpoints and agents, users and tokens, the Policy
// Service's allocations and configuration, access rules, events and
// estimates). It depends on nothing else in Sluice, so that a client or
// an agent built on it does not pull in the server, its store and its
// database drivers.
//
// The struct tags are the API's: json names the fields, and doc, enum,
// minimum and the like describe and bound them in the OpenAPI document
// that package api publishes (huma reads them).
package wire
