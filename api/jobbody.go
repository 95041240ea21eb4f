package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// Submissions are validated here, file by file, rather than by huma.
//
// huma validates a body by decoding it whole into maps and slices of
// interfaces first, then into the input struct: a job of 200,000 files,
// 24 MB of JSON, took 330 MB, and a body at the 512 MiB limit would take
// several gigabytes, from any user with a token. jobBodyValidator checks
// the same schema (huma's own, from the OpenAPI document, with huma's
// messages) one file at a time, so only one file is ever held in that
// form; the operation then skips huma's whole-body pass.

// jobValidation is what jobBodyValidator checks a submission against.
type jobValidation struct {
	api huma.API
	// job is JobIn's schema without its files; file is one file's.
	job, file *huma.Schema
	minFiles  int
	maxFiles  int
}

func newJobValidation(api huma.API) *jobValidation {
	reg := api.OpenAPI().Components.Schemas
	job := reg.Schema(reflect.TypeFor[JobIn](), true, "")
	for job.Ref != "" {
		job = reg.SchemaFromRef(job.Ref)
	}
	files := job.Properties["files"]
	v := &jobValidation{api: api, file: files.Items, minFiles: 0, maxFiles: -1}
	if files.MinItems != nil {
		v.minFiles = *files.MinItems
	}
	if files.MaxItems != nil {
		v.maxFiles = *files.MaxItems
	}
	// The job's own fields, with any files accepted: they are checked
	// one by one.
	top := *job
	top.Properties = maps.Clone(job.Properties)
	anything := &huma.Schema{}
	anything.PrecomputeMessages()
	top.Properties["files"] = anything
	v.job = &top
	return v
}

// middleware validates the body of a job submission (operation
// submit-job, which skips huma's own validation) and hands it on.
func (v *jobValidation) middleware(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op == nil || op.OperationID != "submit-job" {
		next(ctx)
		return
	}
	if ct := ctx.Header("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			_ = huma.WriteErr(v.api, ctx, http.StatusUnsupportedMediaType, fmt.Sprintf("a job is JSON (Content-Type application/json), not %q", ct))
			return
		}
	}
	r, _ := humago.Unwrap(ctx)
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJobBody+1))
	r.Body.Close()
	switch {
	case err != nil:
		_ = huma.WriteErr(v.api, ctx, http.StatusBadRequest, "cannot read request body", err)
		return
	case len(body) > maxJobBody:
		_ = huma.WriteErr(v.api, ctx, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is too large limit=%d bytes", maxJobBody))
		return
	}
	if status, errs := v.check(body); len(errs) > 0 {
		msg := "validation failed"
		if status == http.StatusBadRequest {
			msg = "the body is not JSON"
		}
		_ = huma.WriteErr(v.api, ctx, status, msg, errs...)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	next(ctx)
}

// check validates a job's JSON: the job's fields against its schema, then
// each file against the file schema, decoding one file at a time. It
// returns the status and errors of a refusal (none: valid).
func (v *jobValidation) check(body []byte) (int, []error) {
	reg := v.api.OpenAPI().Components.Schemas
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		var generic any
		if json.Unmarshal(body, &generic) == nil {
			// JSON, but not an object: the schema says what is wrong.
			res := &huma.ValidateResult{}
			huma.Validate(reg, v.job, huma.NewPathBuffer([]byte("body"), len("body")), huma.ModeWriteToServer, generic, res)
			return http.StatusUnprocessableEntity, res.Errors
		}
		return http.StatusBadRequest, []error{&huma.ErrorDetail{Location: "body", Message: err.Error()}}
	}
	res := &huma.ValidateResult{}
	generic := make(map[string]any, len(top))
	var files json.RawMessage
	for k, raw := range top {
		if k == "files" {
			files = raw
			generic[k] = nil // present; checked below
			continue
		}
		var x any
		if err := json.Unmarshal(raw, &x); err != nil {
			return http.StatusBadRequest, []error{&huma.ErrorDetail{Location: "body." + k, Message: err.Error()}}
		}
		generic[k] = x
	}
	huma.Validate(reg, v.job, huma.NewPathBuffer([]byte("body"), len("body")), huma.ModeWriteToServer, generic, res)
	if files != nil {
		v.checkFiles(files, res)
	}
	if len(res.Errors) > 0 {
		return http.StatusUnprocessableEntity, res.Errors
	}
	return 0, nil
}

// maxFileErrors bounds the errors reported for the files of one job.
const maxFileErrors = 100

// checkFiles validates the files array one element at a time.
func (v *jobValidation) checkFiles(raw json.RawMessage, res *huma.ValidateResult) {
	reg := v.api.OpenAPI().Components.Schemas
	path := huma.NewPathBuffer([]byte("body.files"), len("body.files"))
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		res.Add(path, nil, "expected array")
		return
	}
	n, before := 0, len(res.Errors)
	for dec.More() {
		var f any
		if err := dec.Decode(&f); err != nil {
			path.PushIndex(n)
			res.Add(path, nil, err.Error())
			path.Pop()
			return
		}
		if len(res.Errors)-before < maxFileErrors {
			path.PushIndex(n)
			huma.Validate(reg, v.file, path, huma.ModeWriteToServer, f, res)
			path.Pop()
		}
		n++
	}
	if n < v.minFiles {
		res.Add(path, nil, fmt.Sprintf("expected array length >= %d", v.minFiles))
	}
	if v.maxFiles >= 0 && n > v.maxFiles {
		res.Add(path, nil, fmt.Sprintf("expected array length <= %d", v.maxFiles))
	}
}
