package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/auth"
)

// The two kinds of token have commands of their own, named so that one is
// not taken for the other: API tokens (the server checks them; sluice
// commands and the REST API send them) and data tokens (agents check
// them; a server hands them out per transfer, and a server-less sluice cp
// mints its own from the agents' key).

// newDataTokenCmd is `sluice data-token`: a data token, the short-lived
// bearer token agents check (signed with their token key), for a
// server-less sluice cp or curl. API tokens, which the server checks, are
// `sluice api-token`'s.
func newDataTokenCmd() *cobra.Command {
	var keyFile, scope, prefix, aud, sub string
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "data-token",
		Short: "Print a data token for agents, signed with their token key (API tokens: sluice api-token)",
		Example: `  sluice data-token --token-key token.key --scope read --prefix /data/run7 --aud dtn1 --ttl 30m
  curl -H "Authorization: Bearer $(sluice data-token --token-key token.key)" http://dtn1:7000/v1/info`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return errors.New("data-token: --token-key is required")
			}
			if ttl < time.Second || ttl > 366*24*time.Hour {
				return fmt.Errorf("data-token: --ttl %s: want from 1s to a year (8784h); data tokens are meant to be short-lived", ttl)
			}
			key, err := auth.LoadKey(keyFile)
			if err != nil {
				return fmt.Errorf("data-token: %w", err)
			}
			c := auth.Claims{Sub: sub, Scope: scope, Prefix: prefix, Aud: aud, Exp: time.Now().Add(ttl).Unix()}
			tok, err := auth.Mint(key, c)
			if err != nil {
				return fmt.Errorf("data-token: %w", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), dataTokenOut{Token: tok, Sub: c.Sub, Scope: c.Scope, Prefix: c.Prefix, Aud: c.Aud,
					Expires: time.Unix(c.Exp, 0).UTC()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "token-key", "", "file with the token key (required)")
	f.StringVar(&scope, "scope", "rw", "read, write or rw")
	f.StringVar(&prefix, "prefix", "/", "subtree the token covers")
	f.StringVar(&aud, "aud", "*", "agent name the token is for (* for any)")
	f.StringVar(&sub, "sub", os.Getenv("USER"), "who the token is for (shows in agent logs)")
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	f.BoolVar(&asJSON, "json", false, "print JSON: the token and its claims")
	return cmd
}

// dataTokenOut is what `sluice data-token --json` prints.
type dataTokenOut struct {
	Token   string    `json:"token"`
	Sub     string    `json:"sub"`
	Scope   string    `json:"scope"`
	Prefix  string    `json:"prefix"`
	Aud     string    `json:"aud"`
	Expires time.Time `json:"expires"`
}

// newLegacyTokenCmd is `sluice token`, the name both kinds of token once
// shared: by itself it minted data tokens, its subcommands made API
// tokens. It still does both, hidden, and says which command to use.
func newLegacyTokenCmd() *cobra.Command {
	cmd := newDataTokenCmd()
	cmd.Use = "token"
	cmd.Hidden = true
	deprecated(cmd, "`sluice data-token` for data tokens (agents, server-less cp) and `sluice api-token create` for API tokens")
	for _, sub := range []*cobra.Command{newTokenCreateCmd(), newTokenListCmd(), newTokenRevokeCmd()} {
		deprecated(sub, "`sluice api-token "+sub.Name()+"`")
		cmd.AddCommand(sub)
	}
	return cmd
}

// deprecated makes cmd say, on stderr, that its name is an old one and
// what to use instead. (Cobra's Deprecated prints on the command's output
// when one is set, which would mix the notice into what a script reads.)
func deprecated(cmd *cobra.Command, use string) {
	cmd.PreRun = func(cmd *cobra.Command, args []string) {
		fmt.Fprintf(cmd.ErrOrStderr(), "sluice: %q is deprecated and will be removed: use %s\n", cmd.CommandPath(), use)
	}
}

// newAPITokenCmd is `sluice api-token`: the tokens the server checks, for
// sluice commands and the REST API. Data tokens, which agents check, are
// `sluice data-token`'s.
func newAPITokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api-token",
		Short: "Create, list and revoke API tokens (for sluice commands and the REST API)",
	}
	cmd.AddCommand(newTokenCreateCmd(), newTokenListCmd(), newTokenRevokeCmd())
	return cmd
}

func newTokenCreateCmd() *cobra.Command {
	var in api.TokenIn
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API token (for yourself, or as an admin for any user)",
		Example: `  sluice api-token create --user alice --vo cms --ttl 720h
  SLUICE_TOKEN=$(sluice api-token create --user alice) sluice status`,
		Args: cobra.NoArgs,
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if ttl < 0 {
			return errors.New("api-token create: --ttl must not be negative")
		}
		in.TTLSeconds = int64(ttl / time.Second)
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("api-token create: %w", err)
		}
		out, err := cl.CreateToken(cmd.Context(), in)
		if err != nil {
			return fmt.Errorf("api-token create: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), out)
		}
		fmt.Fprintln(cmd.OutOrStdout(), out.Token)
		until := "no expiry"
		if out.Expires != nil {
			until = "expires " + out.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "token for %s (VO %s, admin %v, %s)\n", out.User, out.VO, out.Admin, until)
		return nil
	}
	f := cmd.Flags()
	f.StringVar(&in.User, "user", "", "user (default: yourself); created if new")
	f.StringVar(&in.VO, "vo", "", "the new user's VO")
	f.BoolVar(&in.Admin, "admin", false, "make the new user an admin")
	f.DurationVar(&ttl, "ttl", 0, "lifetime (0: no expiry; a user's own new token expires no later than the token used)")
	f.StringVar(&in.Label, "label", "", "a label for the token")
	f.BoolVar(&asJSON, "json", false, "print JSON: the token, its user, VO and expiry")
	return cmd
}

func newTokenListCmd() *cobra.Command {
	var user string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your API tokens (admins: --user for another's); secrets are never shown",
		Args:  cobra.NoArgs,
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("api-token list: %w", err)
		}
		ts, err := cl.Tokens(cmd.Context(), user)
		if err != nil {
			return fmt.Errorf("api-token list: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), ts)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tLABEL\tCREATED\tEXPIRES")
		for _, t := range ts {
			exp := "never"
			if !t.Expires.IsZero() {
				exp = t.Expires.Format(time.RFC3339)
				if t.Expired {
					exp += " (expired)"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, dash(t.Label), t.Created.Format(time.RFC3339), exp)
		}
		return tw.Flush()
	}
	cmd.Flags().StringVar(&user, "user", "", "another user's tokens (admins)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTokenRevokeCmd() *cobra.Command {
	var user string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke an API token at once (its ID from `sluice api-token list`)",
		Example: `  sluice api-token list; sluice api-token revoke 3f9a0c12b4e7`,
		Args:    cobra.ExactArgs(1),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("api-token revoke: %w", err)
		}
		if err := cl.RevokeToken(cmd.Context(), user, args[0]); err != nil {
			return fmt.Errorf("api-token revoke: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), revokedOut{ID: args[0], Revoked: true})
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "token %s revoked\n", args[0])
		return nil
	}
	cmd.Flags().StringVar(&user, "user", "", "another user's token (admins)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// revokedOut is what `sluice api-token revoke --json` prints.
type revokedOut struct {
	ID      string `json:"id"`
	Revoked bool   `json:"revoked"`
}
