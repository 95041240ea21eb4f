package webdav

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/sluice-dtn/sluice/backend"
)

// propfindBody asks for what a FileInfo holds, nothing more (a server
// may compute some properties, checksums say, at a cost).
const propfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/></D:prop></D:propfind>
`

// multistatus is the part of a 207 Multi-Status answer the backend reads
// (RFC 4918, section 14.16). Namespaces are matched, not prefixes:
// servers bind DAV: to prefixes of their own.
type multistatus struct {
	Responses []struct {
		Href      string `xml:"DAV: href"`
		Propstats []struct {
			Prop struct {
				ResourceType struct {
					Collection *struct{} `xml:"DAV: collection"`
				} `xml:"DAV: resourcetype"`
				Length   string `xml:"DAV: getcontentlength"`
				Modified string `xml:"DAV: getlastmodified"`
			} `xml:"DAV: prop"`
			Status string `xml:"DAV: status"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}

// maxPropfind bounds the answer read for one directory: 256 MiB is a
// listing of about a million entries.
const maxPropfind = 256 << 20

// propfind describes p (depth "0") or p and its children (depth "1").
// A directory is asked for again under its collection URL (with a
// slash) when the server redirects there.
func (b *Backend) propfind(ctx context.Context, p, depth string) ([]backend.FileInfo, error) {
	dir := depth != "0"
	for attempt := 0; ; attempt++ {
		u := b.url(p, dir)
		resp, err := b.do(ctx, "PROPFIND", u, http.Header{
			"Depth":        {depth},
			"Content-Type": {`application/xml; charset="utf-8"`},
		}, strings.NewReader(propfindBody), int64(len(propfindBody)))
		if err != nil {
			return nil, err
		}
		what := "PROPFIND " + u
		switch resp.StatusCode {
		case http.StatusMultiStatus:
		case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			if attempt == 0 && !dir {
				drain(resp)
				dir = true
				continue
			}
			return nil, statusError(what, resp)
		case http.StatusOK:
			// Not a WebDAV server (or not for this path): a plain
			// GET's answer is no description.
			drain(resp)
			return nil, fmt.Errorf("webdav: %s: answered 200 instead of 207 Multi-Status: %w: not a WebDAV server?", what, backend.ErrInvalid)
		default:
			return nil, statusError(what, resp)
		}
		var ms multistatus
		err = xml.NewDecoder(io.LimitReader(resp.Body, maxPropfind)).Decode(&ms)
		drain(resp)
		if err != nil {
			return nil, fmt.Errorf("webdav: %s: reading its answer: %w", what, err)
		}
		return b.fileInfos(ms, what)
	}
}

// fileInfos turns a multistatus into FileInfos of backend paths.
func (b *Backend) fileInfos(ms multistatus, what string) ([]backend.FileInfo, error) {
	var out []backend.FileInfo
	for _, r := range ms.Responses {
		p, err := b.hrefPath(r.Href)
		if err != nil {
			return nil, fmt.Errorf("webdav: %s: %w", what, err)
		}
		fi := backend.FileInfo{Path: p}
		found := false
		for _, ps := range r.Propstats {
			if !statusOK(ps.Status) {
				continue // the properties the server does not have
			}
			found = true
			if ps.Prop.ResourceType.Collection != nil {
				fi.IsDir = true
			}
			if ps.Prop.Length != "" {
				if n, err := strconv.ParseInt(strings.TrimSpace(ps.Prop.Length), 10, 64); err == nil {
					fi.Size = n
				}
			}
			if ps.Prop.Modified != "" {
				if t, err := http.ParseTime(strings.TrimSpace(ps.Prop.Modified)); err == nil {
					fi.ModTime = t
				}
			}
		}
		if !found {
			continue
		}
		if fi.IsDir {
			fi.Size = 0 // a directory's "length" is its inode's
		}
		out = append(out, fi)
	}
	return out, nil
}

// statusOK says whether a propstat's "HTTP/1.1 200 OK" is a 2xx.
func statusOK(s string) bool {
	f := strings.Fields(s)
	return len(f) >= 2 && strings.HasPrefix(f[1], "2")
}

// hrefPath is the backend path an href names: an absolute URL or path,
// escaped as a URL's path is. A server that leaves a name's '%'
// unescaped gives an href that does not unescape: its valid escapes are
// decoded, and a '%' that starts none is kept.
func (b *Backend) hrefPath(href string) (string, error) {
	raw := strings.TrimSpace(href)
	if i := strings.Index(raw, "://"); i >= 0 {
		if j := strings.Index(raw[i+3:], "/"); j >= 0 {
			raw = raw[i+3+j:]
		} else {
			raw = "/"
		}
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		p = lenientUnescape(raw)
	}
	p = path.Clean("/" + p)
	rel, ok := strings.CutPrefix(p, b.prefix)
	if b.prefix == "" {
		rel, ok = p, true
	}
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", fmt.Errorf("href %q is not below the backend's root %q", href, b.prefix)
	}
	return clean(rel), nil
}

// lenientUnescape decodes the %XX escapes of s and keeps any other '%'.
func lenientUnescape(s string) string {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				out.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}
