package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/stork"
)

// Stork submit files (`sluice submit -f` of a file of Condor ClassAds) are
// read and checked by package stork; this runs them against the service.

// runClassAds runs a file of ads as Stork would, one job or estimation
// per ad, after checking every ad first (their syntax, then that the
// endpoints they name are registered), so that a mistake in one ad does
// not leave the ads before it submitted and those after it not.
func runClassAds(ctx context.Context, cl *client.Client, ads []stork.Ad, w, notes io.Writer, asJSON bool) error {
	acts := make([]stork.Action, len(ads))
	for i, ad := range ads {
		a, err := stork.Check(ad)
		if err != nil {
			return fmt.Errorf("ad %d: %w (nothing was submitted)", i+1, err)
		}
		acts[i] = a
	}
	if eps, err := cl.Endpoints(ctx); err == nil {
		known := map[string]bool{}
		for _, e := range eps {
			known[e.Name] = true
			if u, err := url.Parse(e.URL); err == nil {
				known[u.Host] = true
			}
		}
		for i, a := range acts {
			for _, u := range []string{a.Src, a.Dst} {
				_, rest, _ := strings.Cut(u, "://")
				if host, _, _ := strings.Cut(rest, "/"); !known[host] {
					return fmt.Errorf("ad %d: %s: no endpoint %q is registered (see `sluice endpoints`; nothing was submitted)", i+1, u, host)
				}
			}
		}
	}
	for i, a := range acts {
		for _, n := range a.Notes {
			fmt.Fprintf(notes, "ad %d: note: %s\n", i+1, n)
		}
		if err := runClassAd(ctx, cl, a, w, asJSON); err != nil {
			if i == 0 {
				return fmt.Errorf("ad 1: %w (nothing was submitted)", err)
			}
			return fmt.Errorf("ad %d: %w (ads 1-%d ran; the ads after it did not)", i+1, err, i)
		}
	}
	return nil
}

// runClassAd submits an ad's job or asks for its estimate, and prints the
// answer.
func runClassAd(ctx context.Context, cl *client.Client, a stork.Action, w io.Writer, asJSON bool) error {
	if a.Job != nil {
		j, _, err := cl.Submit(ctx, *a.Job)
		if err != nil {
			return err
		}
		if asJSON {
			return jsonLine(w, j)
		}
		fmt.Fprintln(w, j.ID)
		return nil
	}
	out, err := cl.Estimate(ctx, *a.Est)
	if err != nil {
		return err
	}
	if asJSON {
		return jsonLine(w, out)
	}
	printEstimate(w, out)
	return nil
}

func jsonLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
