// Package client is the Go client of the Sluice REST API (package api):
// what the CLI (`sluice submit`, `status`, `watch`, ...) and the agents
// (registration and heartbeats) use to talk to `sluice serve`.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/pki"
	"github.com/sluice-dtn/sluice/wire"
)

// Client talks to one server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the server at base (http(s)://host:port) that
// presents token. A nil hc means a client with a 60 s timeout (the event
// stream uses its own, without one).
func New(base, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q: want http(s)://host:port", base)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), token: token, http: hc}, nil
}

// Error is a problem document (RFC 9457) the server answered with.
type Error struct {
	Status int
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location"`
	} `json:"errors"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: %d %s", e.Status, e.Title)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, d := range e.Errors {
		fmt.Fprintf(&b, "; %s", d.Message)
		if d.Location != "" {
			fmt.Fprintf(&b, " (%s)", d.Location)
		}
	}
	return b.String()
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("client: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A certificate the client does not trust says what to do.
		return 0, fmt.Errorf("client: %s %s: %w", method, path, pki.Explain(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, e) != nil && len(b) > 0 {
			e.Detail = strings.TrimSpace(string(b))
		}
		e.Status = resp.StatusCode
		return resp.StatusCode, e
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("client: decoding the answer to %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// Submit submits a job; created is false when the server returned an
// earlier job with the same submission id.
func (c *Client) Submit(ctx context.Context, job any) (j wire.JobOut, created bool, err error) {
	out, created, err := c.SubmitJob(ctx, job)
	return out.JobOut, created, err
}

// SubmitJob is Submit with the whole answer: its Warnings name what of
// the submission the service accepted without honouring.
func (c *Client) SubmitJob(ctx context.Context, job any) (j wire.SubmitOut, created bool, err error) {
	st, err := c.do(ctx, http.MethodPost, "/v1/jobs", job, &j)
	return j, st == http.StatusCreated, err
}

// Audit returns all of a job's state changes, oldest first, page by
// page.
func (c *Client) Audit(ctx context.Context, id int64) ([]wire.AuditOut, error) {
	const page = 10000
	var all []wire.AuditOut
	for {
		var out []wire.AuditOut
		q := url.Values{"from": {strconv.Itoa(len(all))}, "limit": {strconv.Itoa(page)}}
		if _, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%d/audit?%s", id, q.Encode()), nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out...)
		if len(out) < page {
			return all, nil
		}
	}
}

// RequestAllocation asks the Policy Service for streams on a pair.
func (c *Client) RequestAllocation(ctx context.Context, in wire.AllocationIn) (wire.AllocationOut, error) {
	var out wire.AllocationOut
	_, err := c.do(ctx, http.MethodPost, "/v1/allocations", in, &out)
	return out, err
}

// UpdateAllocation renews an allocation and asks for more streams
// (streams 0) or a given number.
func (c *Client) UpdateAllocation(ctx context.Context, id string, in wire.AllocationUpdateIn) (wire.AllocationOut, error) {
	var out wire.AllocationOut
	_, err := c.do(ctx, http.MethodPut, "/v1/allocations/"+url.PathEscape(id), in, &out)
	return out, err
}

// ReleaseAllocation gives an allocation's streams back.
func (c *Client) ReleaseAllocation(ctx context.Context, id, client string) error {
	p := "/v1/allocations/" + url.PathEscape(id)
	if client != "" {
		p += "?client=" + url.QueryEscape(client)
	}
	_, err := c.do(ctx, http.MethodDelete, p, nil, nil)
	return err
}

// Allocations lists the caller's allocations (admins: all).
func (c *Client) Allocations(ctx context.Context) ([]wire.AllocationOut, error) {
	var out []wire.AllocationOut
	_, err := c.do(ctx, http.MethodGet, "/v1/allocations", nil, &out)
	return out, err
}

// Allocation returns one allocation.
func (c *Client) Allocation(ctx context.Context, id string) (wire.AllocationOut, error) {
	var out wire.AllocationOut
	_, err := c.do(ctx, http.MethodGet, "/v1/allocations/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Policy returns the Policy Service's configuration.
func (c *Client) Policy(ctx context.Context) (wire.PolicyConfig, error) {
	var out wire.PolicyConfig
	_, err := c.do(ctx, http.MethodGet, "/v1/policy", nil, &out)
	return out, err
}

// SetPolicy changes it (admins).
func (c *Client) SetPolicy(ctx context.Context, cfg wire.PolicyConfig) (wire.PolicyConfig, error) {
	var out wire.PolicyConfig
	_, err := c.do(ctx, http.MethodPut, "/v1/policy", cfg, &out)
	return out, err
}

// Tokens lists the caller's API tokens (user: another's, for admins).
func (c *Client) Tokens(ctx context.Context, user string) ([]wire.TokenInfo, error) {
	var out []wire.TokenInfo
	p := "/v1/tokens"
	if user != "" {
		p += "?user=" + url.QueryEscape(user)
	}
	_, err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}

// RevokeToken revokes an API token by its ID (user: another's, for admins).
func (c *Client) RevokeToken(ctx context.Context, user, id string) error {
	p := "/v1/tokens/" + url.PathEscape(id)
	if user != "" {
		p += "?user=" + url.QueryEscape(user)
	}
	_, err := c.do(ctx, http.MethodDelete, p, nil, nil)
	return err
}

// Access returns the access rules (all for an admin, one's own otherwise).
func (c *Client) Access(ctx context.Context) (wire.AccessConfig, error) {
	var out wire.AccessConfig
	_, err := c.do(ctx, http.MethodGet, "/v1/access", nil, &out)
	return out, err
}

// SetAccess replaces the access rules (admins).
func (c *Client) SetAccess(ctx context.Context, a wire.AccessConfig) (wire.AccessConfig, error) {
	var out wire.AccessConfig
	_, err := c.do(ctx, http.MethodPut, "/v1/access", a, &out)
	return out, err
}

// PolicyUsage returns the streams allocated per pair and VO (admins).
func (c *Client) PolicyUsage(ctx context.Context) ([]wire.PairUsage, error) {
	var out []wire.PairUsage
	_, err := c.do(ctx, http.MethodGet, "/v1/policy/usage", nil, &out)
	return out, err
}

// Estimate asks the estimation service how a transfer should run.
// Sampling takes as long as the path needs (minutes for large samples on
// a slow path, and the server stops sampling when the caller goes), so
// the client's per-request timeout does not apply: ctx bounds it.
func (c *Client) Estimate(ctx context.Context, in wire.EstimateIn) (wire.EstimateOut, error) {
	var out wire.EstimateOut
	hc := *c.http
	hc.Timeout = 0
	long := *c
	long.http = &hc
	_, err := long.do(ctx, http.MethodPost, "/v1/estimate", in, &out)
	return out, err
}

// Jobs lists the newest jobs, at most limit (state "" for all; limit 0:
// the server's default page, 100).
func (c *Client) Jobs(ctx context.Context, state string, limit int) ([]wire.JobOut, error) {
	return c.JobsPage(ctx, state, 0, limit)
}

// MaxJobsPage is the most jobs the server lists in one answer.
const MaxJobsPage = 1000

// JobsPage lists one page of jobs, newest first: at most limit (1 to
// MaxJobsPage; 0: the server's default, 100) with IDs below before (0:
// from the newest). The next page is before the last ID of this one.
func (c *Client) JobsPage(ctx context.Context, state string, before int64, limit int) ([]wire.JobOut, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	var out []wire.JobOut
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &out)
	return out, err
}

// JobsQuery says which jobs ListJobs lists.
type JobsQuery struct {
	State  string // only jobs in this state ("": all)
	Before int64  // only jobs with smaller IDs (0: from the newest)
	Limit  int    // at most this many (0: all)
	// Page is how many jobs each request asks for (0: MaxJobsPage).
	Page int
}

// ListJobs lists the jobs q selects, newest first, asking the server
// for them a page at a time.
func (c *Client) ListJobs(ctx context.Context, q JobsQuery) ([]wire.JobOut, error) {
	page := q.Page
	if page <= 0 || page > MaxJobsPage {
		page = MaxJobsPage
	}
	var all []wire.JobOut
	before := q.Before
	for q.Limit <= 0 || len(all) < q.Limit {
		n := page
		if q.Limit > 0 {
			n = min(n, q.Limit-len(all))
		}
		js, err := c.JobsPage(ctx, q.State, before, n)
		if err != nil {
			return nil, err
		}
		all = append(all, js...)
		if len(js) < n {
			break // the last page
		}
		before = js[len(js)-1].ID
	}
	return all, nil
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id int64) (wire.JobOut, error) {
	var out wire.JobOut
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%d", id), nil, &out)
	return out, err
}

// Files lists a job's files from index from (limit 0: the server's
// default page).
func (c *Client) Files(ctx context.Context, id int64, from, limit int) ([]wire.FileOut, error) {
	q := url.Values{"from": {strconv.Itoa(from)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []wire.FileOut
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%d/files?%s", id, q.Encode()), nil, &out)
	return out, err
}

// AllFiles lists every file of a job, page by page.
func (c *Client) AllFiles(ctx context.Context, id int64) ([]wire.FileOut, error) {
	var all []wire.FileOut
	for {
		page, err := c.Files(ctx, id, len(all), 10000)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < 10000 {
			return all, nil
		}
	}
}

// Cancel cancels a job.
func (c *Client) Cancel(ctx context.Context, id int64) (wire.JobOut, error) {
	var out wire.JobOut
	_, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/v1/jobs/%d", id), nil, &out)
	return out, err
}

// Endpoints lists the endpoints.
func (c *Client) Endpoints(ctx context.Context) ([]wire.EndpointOut, error) {
	var out []wire.EndpointOut
	_, err := c.do(ctx, http.MethodGet, "/v1/endpoints", nil, &out)
	return out, err
}

// PutStorageEndpoint registers or changes a storage endpoint (admins).
func (c *Client) PutStorageEndpoint(ctx context.Context, name string, in wire.StorageEndpointIn) (wire.EndpointOut, error) {
	var out wire.EndpointOut
	_, err := c.do(ctx, http.MethodPut, "/v1/endpoints/"+url.PathEscape(name), in, &out)
	return out, err
}

// DeleteStorageEndpoint removes a storage endpoint and its credential
// (admins).
func (c *Client) DeleteStorageEndpoint(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/endpoints/"+url.PathEscape(name), nil, nil)
	return err
}

// CreateToken creates an API token.
func (c *Client) CreateToken(ctx context.Context, in wire.TokenIn) (wire.TokenOut, error) {
	var out wire.TokenOut
	_, err := c.do(ctx, http.MethodPost, "/v1/tokens", in, &out)
	return out, err
}

// Whoami returns the caller's user.
func (c *Client) Whoami(ctx context.Context) (wire.UserOut, error) {
	var out wire.UserOut
	_, err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, &out)
	return out, err
}

// Register registers an agent (the client's token is the join token).
func (c *Client) Register(ctx context.Context, in wire.AgentIn) (wire.JoinedOut, error) {
	var out wire.JoinedOut
	_, err := c.do(ctx, http.MethodPost, "/v1/agents/register", in, &out)
	return out, err
}

// Heartbeat tells the server the agent is alive.
func (c *Client) Heartbeat(ctx context.Context, in wire.AgentIn) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/agents/heartbeat", in, nil)
	return err
}

// Events streams events (of one job, or all the caller may see if job is
// 0) to f until ctx ends, f returns false, or the stream breaks.
func (c *Client) Events(ctx context.Context, job int64, f func(wire.Event) bool) error {
	return c.EventsFrom(ctx, job, nil, f)
}

// EventsFrom is Events with open called once, when the stream is live:
// the server has subscribed the caller, so nothing that happens after
// open starts is missed. A caller reads the state it follows in open (a
// job that may have ended already) instead of before the stream, where
// an end between the read and the subscription would be seen by neither;
// open returning false ends the stream there.
func (c *Client) EventsFrom(ctx context.Context, job int64, open func() bool, f func(wire.Event) bool) error {
	path := "/v1/events"
	if job > 0 {
		path += "?job=" + strconv.FormatInt(job, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	// The stream lasts as long as the caller wants: no client timeout.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(e)
		e.Status = resp.StatusCode
		return e
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var e wire.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("client: event %q: %w", data, err)
		}
		if e.Type == "error" {
			return fmt.Errorf("client: events: %s", e.Detail)
		}
		if e.Type == "keepalive" {
			// The server sends one as soon as it has subscribed the
			// caller, before any other event.
			if open != nil {
				o := open
				open = nil
				if !o() {
					return nil
				}
			}
			continue
		}
		if !f(e) {
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("client: events: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("client: the event stream ended")
}

// DataToken asks the server for a data token to read (or, with write,
// write in the directory of) one path of an agent, named
// sluice://ENDPOINT/path.
func (c *Client) DataToken(ctx context.Context, u string, write bool) (wire.DataTokenOut, error) {
	var out wire.DataTokenOut
	_, err := c.do(ctx, http.MethodPost, "/v1/data-tokens", wire.DataTokenIn{URL: u, Write: write}, &out)
	return out, err
}
