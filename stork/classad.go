package stork

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/dustin/go-humanize"

	"github.com/sluice-dtn/sluice/wire"
)

// Ad is one ad's attributes, by lower-case name.
type Ad map[string]string

// maxClassAdFile bounds a submit file: Stork's are a few lines per ad.
const maxClassAdFile = 16 << 20

// Parse reads every ad in r.
func Parse(r io.Reader) ([]Ad, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxClassAdFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxClassAdFile {
		// Cut, the file would lose the ads after the cut without a word.
		return nil, fmt.Errorf("more than %d MiB: too large for a submit file", maxClassAdFile>>20)
	}
	p := &adParser{s: stripComments(string(b)), line: 1}
	var ads []Ad
	for {
		p.space()
		if p.eof() {
			break
		}
		if !p.take('[') {
			return nil, p.errorf("want '[' to open an ad")
		}
		ad := Ad{}
		for {
			p.space()
			if p.take(']') {
				break
			}
			if p.eof() {
				return nil, p.errorf("ad not closed with ']'")
			}
			name := p.word()
			if name == "" {
				return nil, p.errorf("want an attribute name")
			}
			p.space()
			if !p.take('=') {
				return nil, p.errorf("want '=' after %s", name)
			}
			p.space()
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			key := strings.ToLower(name)
			if _, dup := ad[key]; dup {
				return nil, p.errorf("attribute %s given twice", name)
			}
			ad[key] = v
			p.space()
			if !p.take(';') && !p.peek(']') {
				return nil, p.errorf("want ';' after %s", name)
			}
		}
		ads = append(ads, ad)
	}
	if len(ads) == 0 {
		return nil, errors.New("no ClassAd ([ ... ]) found")
	}
	return ads, nil
}

// stripComments blanks // and # comments outside quoted strings, keeping
// newlines so that line numbers stay right.
func stripComments(s string) string {
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			b.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		case c == '"':
			inStr = true
		case c == '#' || (c == '/' && i+1 < len(s) && s[i+1] == '/'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			if i < len(s) {
				b.WriteByte('\n')
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

type adParser struct {
	s    string
	i    int
	line int
}

func (p *adParser) eof() bool { return p.i >= len(p.s) }

func (p *adParser) errorf(format string, a ...any) error {
	return fmt.Errorf("ClassAd line %d: %s", p.line, fmt.Sprintf(format, a...))
}

func (p *adParser) space() {
	for !p.eof() && unicode.IsSpace(rune(p.s[p.i])) {
		if p.s[p.i] == '\n' {
			p.line++
		}
		p.i++
	}
}

func (p *adParser) peek(c byte) bool { return !p.eof() && p.s[p.i] == c }

func (p *adParser) take(c byte) bool {
	if p.peek(c) {
		p.i++
		return true
	}
	return false
}

func (p *adParser) word() string {
	start := p.i
	for !p.eof() {
		c := rune(p.s[p.i])
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '.' || c == '-' || c == '+') {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

func (p *adParser) value() (string, error) {
	if !p.take('"') {
		v := p.word()
		if v == "" {
			return "", p.errorf("want a value")
		}
		return v, nil
	}
	var b strings.Builder
	for {
		if p.eof() {
			return "", p.errorf("string not closed")
		}
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), nil
		case '\n':
			return "", p.errorf("newline in a string")
		case '\\':
			if p.eof() {
				return "", p.errorf("string not closed")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
}

// yes reads a ClassAd boolean: "YES"/TRUE/1 (any case).
func yes(ad Ad, key string) (bool, error) {
	v, ok := ad[key]
	if !ok {
		return false, nil
	}
	switch strings.ToLower(v) {
	case "yes", "true", "1", "y":
		return true, nil
	case "no", "false", "0", "n", "":
		return false, nil
	}
	return false, fmt.Errorf("%s = %q: want YES or NO", key, v)
}

// storkURL turns a Stork URL into Sluice's: sluice:// and sluices:// are
// kept; another scheme's host is taken as the endpoint name, since the
// Sluice agents replace the GridFTP servers Stork talked to.
func storkURL(u string) (string, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || rest == "" {
		return "", fmt.Errorf("%q is not a URL", u)
	}
	switch scheme {
	case "sluice", "sluices":
		return u, nil
	case "gsiftp", "ftp", "http", "https", "root":
		return "sluice://" + rest, nil
	}
	return "", fmt.Errorf("%q: scheme %s is not supported (want sluice://, or gsiftp:// naming a Sluice endpoint)", u, scheme)
}

// storkArgs reads Stork's arguments: -s sample size, -b TCP buffer
// (accepted; agents use kernel autotuning), -p streams (ignored: the
// service chooses).
func storkArgs(s string) (sample, buffer int64, err error) {
	f := strings.Fields(s)
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case "-s", "-b", "-p":
			if i+1 >= len(f) {
				return 0, 0, fmt.Errorf("arguments %q: %s needs a value", s, f[i])
			}
			i++
			if f[i-1] == "-p" {
				continue
			}
			n, err := ParseSize(f[i-1], f[i])
			if err != nil {
				return 0, 0, fmt.Errorf("arguments %q: %w", s, err)
			}
			if f[i-1] == "-s" {
				sample = n
			} else {
				buffer = n
			}
		default:
			// Other globus-url-copy style options (-dbg, -vb, ...)
			// do not apply to the service.
		}
	}
	return sample, buffer, nil
}

// Action is one ad, checked and ready to run: a transfer job (Job) or an
// estimation (Est), the other nil.
type Action struct {
	// Src and Dst are the ad's src_url and dest_url as Sluice URLs.
	Src, Dst string
	Job      *wire.JobIn
	Est      *wire.EstimateIn
	// Notes are what the ad asks for that Sluice does not do, to be
	// printed before it runs.
	Notes []string
}

// Check reads one ad into its action, without asking the service
// anything.
func Check(ad Ad) (Action, error) {
	var a Action
	var err error
	for _, k := range []string{"src_url", "dest_url"} {
		if _, ok := ad[k]; !ok {
			has := "it is empty"
			if len(ad) > 0 {
				has = "it has " + strings.Join(slices.Sorted(maps.Keys(ad)), ", ")
			}
			return a, fmt.Errorf("no %s in the ad (%s)", k, has)
		}
	}
	if a.Src, err = storkURL(ad["src_url"]); err != nil {
		return a, fmt.Errorf("src_url: %w", err)
	}
	if a.Dst, err = storkURL(ad["dest_url"]); err != nil {
		return a, fmt.Errorf("dest_url: %w", err)
	}
	sample, buffer, err := storkArgs(ad["arguments"])
	if err != nil {
		return a, err
	}
	hist, err := yes(ad, "use_history")
	if err != nil {
		return a, err
	}
	switch typ := strings.ToLower(ad["dap_type"]); typ {
	case "transfer", "":
		opt, err := yes(ad, "optimization")
		if err != nil {
			return a, err
		}
		a.Job = &wire.JobIn{Files: []wire.FileIn{{Source: a.Src, Destination: a.Dst}}, Optimization: opt}
		if sample != 0 || buffer != 0 {
			// Stork's transfer ads pass them to the transfer; a job has
			// no place for them. Say so rather than drop them unseen.
			a.Notes = append(a.Notes, fmt.Sprintf("arguments %q: -s and -b apply to estimation ads; a transfer job's optimization samples %d MiB with the endpoints' own buffers", ad["arguments"], wire.DefaultSampleBytes>>20))
		}
	case "estimation":
		in := wire.EstimateIn{Source: a.Src, Destination: a.Dst, SampleSize: sample, Buffer: buffer, UseHistory: hist}
		sz, ok := ad["size"]
		if !ok {
			return a, errors.New(`an estimation ad needs size = "BYTES" (e.g. "5G"): Sluice predicts the time of a given size`)
		}
		if in.Size, err = ParseSize("size", sz); err != nil {
			return a, err
		}
		a.Est = &in
	default:
		return a, fmt.Errorf("dap_type %q: want transfer or estimation", typ)
	}
	// Attributes Sluice does not read are named, never dropped unseen
	// (Stork's own, such as log or output, or a misspelt one).
	used := map[string]bool{"dap_type": true, "src_url": true, "dest_url": true, "arguments": true}
	if a.Job != nil {
		used["optimization"] = true
	} else {
		used["use_history"], used["size"] = true, true
	}
	for _, k := range slices.Sorted(maps.Keys(ad)) {
		if !used[k] {
			a.Notes = append(a.Notes, fmt.Sprintf("attribute %s is not used by Sluice for %s ad; ignored", k, map[bool]string{true: "a transfer", false: "an estimation"}[a.Job != nil]))
		}
	}
	return a, nil
}

// ParseSize reads a byte count such as 5G, 20MB, 128K or 1048576 (bare
// unit letters are decimal, as in humanize: 5G = 5e9; GiB and MiB are
// binary), for submit files and the command line's flags alike; name is
// the attribute, argument or flag the errors name.
func ParseSize(name, s string) (int64, error) {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a size such as 5G, 20MB or 1048576", name, s)
	}
	switch {
	case n == 0:
		return 0, fmt.Errorf("%s %q: must be positive", name, s)
	case n > 1<<62:
		return 0, fmt.Errorf("%s %q: too large (at most 4 EiB)", name, s)
	}
	return int64(n), nil
}
