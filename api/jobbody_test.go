package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// TestJobBodyValidation: a submission checked file by file gets the same
// answer as huma's whole-body validation would give it (status, and the
// location of every error), and a valid one reaches the handler decoded.
func TestJobBodyValidation(t *testing.T) {
	mux := http.NewServeMux()
	api := humago.New(mux, huma.DefaultConfig("t", "1"))
	var jobs *jobValidation
	api.UseMiddleware(func(ctx huma.Context, next func(huma.Context)) { jobs.middleware(ctx, next) })
	var got []JobIn
	handler := func(ctx context.Context, in *submitIn) (*submitOut, error) {
		got = append(got, in.Body)
		return &submitOut{Status: http.StatusCreated}, nil
	}
	// The operation under test, and the same with huma validating.
	huma.Register(api, huma.Operation{OperationID: "submit-job", Method: http.MethodPost, Path: "/v1/jobs",
		MaxBodyBytes: maxJobBody, SkipValidateBody: true}, handler)
	huma.Register(api, huma.Operation{OperationID: "submit-huma", Method: http.MethodPost, Path: "/huma",
		MaxBodyBytes: maxJobBody}, handler)
	jobs = newJobValidation(api)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(path, body, ct string) (int, []string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e huma.ErrorModel
		json.NewDecoder(resp.Body).Decode(&e)
		var locs []string
		for _, d := range e.Errors {
			locs = append(locs, d.Location+": "+d.Message)
		}
		slices.Sort(locs)
		return resp.StatusCode, locs
	}
	file := func(i int) string {
		return fmt.Sprintf(`{"source":"sluice://a/f%d","destination":"sluice://b/f%d","size":%d}`, i, i, i)
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"valid", `{"files":[` + file(1) + `,` + file(2) + `],"class":"batch","priority":3,"params":{"foo":1}}`, 201},
		{"no files", `{"files":[]}`, 422},
		{"files missing", `{"class":"batch"}`, 422},
		{"files not an array", `{"files":{"a":1}}`, 422},
		{"bad job field", `{"files":[` + file(1) + `],"priority":9,"class":"x"}`, 422},
		{"bad file fields", `{"files":[` + file(1) + `,{"source":"s","size":-1,"bogus":true,"sources":[1]}]}`, 422},
		{"a file that is a string", `{"files":["x"]}`, 422},
		{"not an object", `[1,2]`, 422},
		{"not JSON", `{"files":[`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			status, locs := post("/v1/jobs", tc.body, "application/json")
			hStatus, hLocs := post("/huma", tc.body, "application/json")
			if status != tc.status {
				t.Errorf("status %d %v, want %d", status, locs, tc.status)
			}
			if status != hStatus || (status == 422 && !slices.Equal(locs, hLocs)) {
				t.Errorf("file by file: %d %q\nhuma:         %d %q", status, locs, hStatus, hLocs)
			}
			if tc.status == 201 && (len(got) != 2 || len(got[0].Files) != 2 || *got[0].Files[1].Size != 2 || !reflect.DeepEqual(got[0], got[1])) {
				t.Errorf("the handler got %+v", got)
			}
		})
	}
	if status, _ := post("/v1/jobs", `{"files":[`+file(1)+`]}`, "application/cbor"); status != http.StatusUnsupportedMediaType {
		t.Errorf("a CBOR body: %d, want 415 (only JSON is checked)", status)
	}
	if status, _ := post("/v1/jobs", `{"files":[`+file(1)+`]}`, ""); status != http.StatusCreated {
		t.Errorf("no Content-Type: %d, want JSON assumed", status)
	}
}
