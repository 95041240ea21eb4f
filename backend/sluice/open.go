package sluice

import (
	"context"
	"errors"

	"github.com/sluice-dtn/sluice/backend"
)

// Open implements backend.OpenFunc for sluice:// and sluices:// URLs: an
// agent, with the tokens o.Tokens gives for the path (read, or read and
// write if o.Write).
func Open(_ context.Context, loc string, o backend.OpenOptions) (backend.Opened, error) {
	base, p, err := ParseURL(loc)
	if err != nil {
		return backend.Opened{}, err
	}
	if o.Tokens == nil {
		return backend.Opened{}, errors.New(loc + ": an agent URL needs a token")
	}
	tokens, err := o.Tokens(p, o.Write)
	if err != nil {
		return backend.Opened{}, err
	}
	b, err := NewWithTokens(base, tokens, o.HTTPClient)
	if err != nil {
		return backend.Opened{}, err
	}
	return backend.Opened{Backend: b, Path: p, URL: loc, Tokens: tokens}, nil
}
