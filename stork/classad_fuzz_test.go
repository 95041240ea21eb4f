package stork

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/api/apitest"
)

// FuzzStorkSubmit reads a Stork submit file as `sluice submit -f` does
// (Parse, Check) and posts each transfer ad's job through the API's real
// submission path to a temporary store (apitest.CheckSubmit: a clear
// refusal, or a sane job that lists back).
// An estimation ad must ask for a positive size and sample. The seeds
// carry the attack inputs of the JSON targets in ClassAd form.
func FuzzStorkSubmit(f *testing.F) {
	for _, s := range []string{
		`[ dap_type = "transfer"; src_url = "gsiftp://a1/home/alice/x"; dest_url = "gsiftp://a2/home/alice/y"; optimization = "YES"; arguments = "-b 128K -s 10M"; ]`,
		`[ dap_type = "transfer"; src_url = "sluice://a1/home/alice/x"; dest_url = "sluice://a2/home/alice"; ]`,
		`[ src_url = "sluice://a1/home/alice/x"; dest_url = "sluice://a2/home/alice/%2e%2e/bob/y" ]`,
		`[ src_url = "sluice://a1/home/alice/x"; dest_url = "sluice://a2/home/alice/../bob/y" ]`,
		`[ src_url = "sluice://a1/home/alice/x%00"; dest_url = "sluice://a2/home/alice/y" ]`,
		`[ src_url = "root://a1/home/alice/` + strings.Repeat("n", 300) + `"; dest_url = "https://a2/home/alice/y" ]`,
		"# two ads\n[ dap_type = \"estimation\"; src_url = \"sluice://a1/home/alice/x\"; dest_url = \"sluice://a2/home/alice/\"; size = \"9223372036854775807\"; use_history = TRUE ]\n[dap_type=\"transfer\";src_url=\"sluice://a1/home/alice/q\";dest_url=\"sluice://a2/home/alice/r\"]",
		`[ dap_type = "estimation"; src_url = "sluice://a1/x"; dest_url = "sluice://a2/y"; size = "-5"; arguments = "-s 0 -b 99999999999999999999" ]`,
		`[ dap_type = "transfer"; src_url = "ftp://"; dest_url = "sluice://a2/home/alice/y" ]`,
		`[ a = "b\"c"; // comment` + "\n]",
	} {
		f.Add(s)
	}
	svc := apitest.New(f)
	f.Fuzz(func(t *testing.T, text string) {
		ads, err := Parse(strings.NewReader(text))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		for _, ad := range ads {
			a, err := Check(ad)
			if err != nil {
				continue
			}
			switch {
			case a.Job != nil:
				body, err := json.Marshal(a.Job)
				if err != nil {
					t.Fatal(err)
				}
				svc.CheckSubmit(t, body)
			case a.Est != nil:
				if a.Est.Size <= 0 || a.Est.SampleSize < 0 || a.Est.Buffer < 0 {
					t.Fatalf("estimation ad %v: size %d, sample %d, buffer %d", ad, a.Est.Size, a.Est.SampleSize, a.Est.Buffer)
				}
			default:
				t.Fatalf("ad %v checked as neither a job nor an estimation", ad)
			}
		}
	})
}
