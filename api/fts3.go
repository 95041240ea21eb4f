package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// FTS3 parameters Sluice does not use are never ignored in silence. Those
// whose ignoring would change what the user gets (a file staged from tape
// and pinned, a multihop route, a QoS transition, a job that expires) are
// refused when set; the others, set to anything but their "off" value,
// are named in the submission's warnings. An "off" value (null, false, "",
// 0, a negative number, FTS3's defaults such as id_generator "standard")
// asks for nothing, so nothing is left undone: FTS3 clients send most
// parameters with such values in every job.

// fts3Refused are the parameters Sluice cannot honour and will not
// ignore, with why.
var fts3Refused = map[string]string{
	"bring_online":      "staging files from tape is not supported",
	"copy_pin_lifetime": "pinning staged files is not supported",
	"archive_timeout":   "waiting for files to be archived to tape is not supported",
	"multihop":          "multihop transfers are not supported; submit one job per hop",
	"target_qos":        "QoS transitions are not supported",
	"max_time_in_queue": "jobs do not expire; the job would run after the time given",
	"staging_metadata":  "staging files from tape is not supported",
}

// fts3Kept are the parameters Sluice does not schedule by but keeps and
// gives back with the job (jobSpec takes them).
var fts3Kept = map[string]bool{"job_metadata": true}

// fts3Warned are the parameters Sluice accepts and does not use, with
// what that means for the job.
var fts3Warned = map[string]string{
	"reuse":              "Sluice moves small files in pull batches of its own choosing",
	"spacetoken":         "sluice agents have no space tokens",
	"source_spacetoken":  "sluice agents have no space tokens",
	"overwrite_on_retry": "not needed: Sluice's attempts never leave a file at the destination, and a retry replaces nothing unless overwrite is set",
	"overwrite_hop":      "not needed: there are no hops",
	"strict_copy":        "Sluice still verifies checksums and creates directories",
	"dst_file_report":    "not reported",
	"retry_delay":        "Sluice waits between attempts as it chooses (up to a minute)",
	"timeout":            "transfers have no time limit",
	"ipv4":               "the agents' addresses decide",
	"ipv6":               "the agents' addresses decide",
	"buffer_size":        "TCP buffers are the system's",
	"credential":         "Sluice authorises with its own tokens",
	"s3alternate":        "not used",
	"id_generator":       "job ids are Sluice's",
	"sid":                "job ids are Sluice's; use submission_id for idempotent submission",
	"archive_metadata":   "not kept",
	"disable_cleanup":    "Sluice always removes the partial files of failed transfers",
	"scitag":             "transfers are not tagged",
	"unmanaged_tokens":   "Sluice authorises with its own tokens",
}

// fts3Params checks the FTS3 parameters Sluice does not use: an error for
// one that is refused, warnings for the others.
func fts3Params(p *ParamsIn) ([]string, error) {
	if p == nil {
		return nil, nil
	}
	others := p.Others()
	names := make([]string, 0, len(others))
	for k := range others {
		names = append(names, k)
	}
	slices.Sort(names)
	var warnings, refused []string
	for _, k := range names {
		raw := others[k]
		if isOff(k, raw) || fts3Kept[k] {
			continue
		}
		v := strings.TrimSpace(string(raw))
		if len(v) > 60 {
			v = v[:57] + "..."
		}
		if why, ok := fts3Refused[k]; ok {
			refused = append(refused, fmt.Sprintf("params.%s %s: %s", k, v, why))
			continue
		}
		why, ok := fts3Warned[k]
		if !ok {
			why = "an FTS3 parameter Sluice does not know"
		}
		warnings = append(warnings, fmt.Sprintf("params.%s %s ignored: %s", k, v, why))
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("FTS3 parameters Sluice cannot honour: %s", strings.Join(refused, "; "))
	}
	return warnings, nil
}

// isOff reports whether an FTS3 parameter's value asks for nothing.
func isOff(name string, raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x <= 0
	case string:
		return x == "" || (name == "id_generator" && x == "standard")
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// fileWarnings names the FTS3 file fields of a submission that Sluice
// does not use, once each with the number of files that set them.
func fileWarnings(files []FileIn) []string {
	activity := 0
	for _, f := range files {
		if f.Activity != "" {
			activity++
		}
	}
	var out []string
	if activity > 0 {
		out = append(out, fmt.Sprintf("files[].activity ignored (%d files): Sluice schedules by priority and class, not by FTS3 activity shares", activity))
	}
	return out
}
