// Package redact is the one place that decides how a URL or connection
// string that may hold a secret is printed.
//
// Secrets are removed by structure, never by searching for their text: a
// search mangles messages when the secret is a common word ("user", "a")
// and still prints it when the text was cut or encoded differently. The
// parsed URL's password, the keyword/value password field and secret-looking
// query parameters are replaced as a whole; a string whose structure is in
// doubt is printed without any of its user info, or not at all.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask replaces a secret as a whole.
const Mask = "xxxxx"

// Hidden stands for a string that could not be parsed safely enough to
// print any of it.
const Hidden = "(not shown: it could not be parsed safely)"

// URL returns raw with its password, and the values of query parameters
// that look secret, replaced by Mask. The user name stays: it is not a
// secret, and it is what a reader needs to tell two URLs apart.
//
// When the user info is ambiguous (see Ambiguous: a password holding an
// unencoded '@', '/', '?' or '#'), no parser can say where the password
// ends: everything up to the last '@' is dropped. A query that does not
// parse is dropped too, and so is a fragment.
func URL(raw string) string {
	scheme, rest, ok := cutScheme(raw)
	if !ok {
		if strings.ContainsAny(raw, "@?") {
			return Hidden
		}
		return raw
	}
	// Taken apart by hand rather than with url.Parse, which refuses a URL
	// with a bad port or escape: such a URL is still printed, with its
	// password masked.
	var user string
	if Ambiguous(raw) {
		rest = rest[strings.LastIndex(rest, "@")+1:]
	} else if at := strings.LastIndex(authority(rest), "@"); at >= 0 {
		name, _, hasPassword := strings.Cut(rest[:at], ":")
		user = name + "@"
		if hasPassword {
			user = name + ":" + Mask + "@"
		}
		rest = rest[at+1:]
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	out := scheme + "://" + user + rest
	if !hasQuery {
		return out
	}
	if _, err := url.ParseQuery(query); err != nil {
		return out // a query that does not parse could hide anything
	}
	// The query is printed as written but for the values replaced:
	// encoding it again would turn what the user typed into something
	// else ({tenant} into %7Btenant%7D, an endpoint into http%3A%2F%2F...).
	pairs := strings.Split(query, "&")
	for i, p := range pairs {
		rawKey, rawVal, _ := strings.Cut(p, "=")
		// Both unescape: ParseQuery accepted them.
		k, _ := url.QueryUnescape(rawKey)
		v, _ := url.QueryUnescape(rawVal)
		switch {
		case secretKey(k):
			pairs[i] = rawKey + "=" + Mask
		case strings.Contains(v, "://"):
			// An endpoint URL inside a URL
			// (s3://b?endpoint=http://k:s@host).
			if r := URL(v); r != v {
				pairs[i] = rawKey + "=" + url.QueryEscape(r)
			}
		}
	}
	return out + "?" + strings.Join(pairs, "&")
}

// Ambiguous says whether a URL's user info cannot be told from the rest:
// the text after the scheme has an '@' after its first '/', '?' or '#' with
// a ':' before them (where a password would start), or more than one '@'
// before them. Parsers disagree on such URLs: for
// "u:12/ss@h/db" (the password "12/ss" unencoded) Go and pgx read the host
// "u", the port 12 and the database "ss@h/db"; for "u:p@ss@h" Go reads the
// password "p@ss" and pgx the password "p" and the host "ss@h". Either way
// a part of the password lands in a field that messages print.
func Ambiguous(raw string) bool {
	_, rest, ok := cutScheme(raw)
	if !ok {
		return false
	}
	auth := authority(rest)
	at := strings.LastIndex(rest, "@")
	return (at >= len(auth) && strings.Contains(auth, ":")) || strings.Count(auth, "@") > 1
}

// cutScheme splits "scheme://rest"; a string that does not start with a
// scheme is not a URL.
func cutScheme(raw string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return "", raw, false
	}
	for i, c := range scheme {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", raw, false
		}
	}
	return scheme, rest, true
}

// authority is rest up to its first '/', '?' or '#'.
func authority(rest string) string {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return rest[:i]
	}
	return rest
}

// secretKey says whether a query parameter's value is a credential: a
// password (PostgreSQL's password and sslpassword), a key, a token, a
// secret, or an Azure SAS signature.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"password", "secret", "key", "token", "sig", "credential"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// DSN returns a PostgreSQL connection string safe to print: a URL as URL
// does, a keyword/value string ("host=h password='p w'") with the values of
// its password fields replaced by Mask. A keyword/value string that does
// not parse is not shown at all: the parser could not say where its
// password ends.
func DSN(s string) string {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return URL(s)
	}
	pairs, ok := parseKeywordValue(s)
	if !ok {
		return Hidden
	}
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p[0])
		b.WriteByte('=')
		if secretKey(p[0]) {
			b.WriteString(Mask)
		} else {
			b.WriteString(quoteValue(p[1]))
		}
	}
	return b.String()
}

// parseKeywordValue splits a libpq keyword/value string: key = value pairs
// separated by spaces, a value either bare (up to a space) or in single
// quotes, with backslash escaping the next character in both.
func parseKeywordValue(s string) ([][2]string, bool) {
	var pairs [][2]string
	for {
		s = strings.TrimLeft(s, " \t\n\r\f\v")
		if s == "" {
			return pairs, true
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, false
		}
		key := strings.TrimRight(s[:eq], " \t\n\r\f\v")
		if key == "" || strings.ContainsAny(key, " \t\n\r\f\v'\\") {
			return nil, false
		}
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\f\v")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			closed := false
			for len(s) > 0 {
				c := s[0]
				s = s[1:]
				if c == '\\' {
					if s == "" {
						return nil, false
					}
					val.WriteByte(s[0])
					s = s[1:]
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, false
			}
			if s != "" && !strings.ContainsAny(s[:1], " \t\n\r\f\v") {
				return nil, false
			}
		} else {
			for len(s) > 0 && !strings.ContainsAny(s[:1], " \t\n\r\f\v") {
				c := s[0]
				s = s[1:]
				if c == '\\' {
					if s == "" {
						return nil, false
					}
					c = s[0]
					s = s[1:]
				}
				val.WriteByte(c)
			}
		}
		pairs = append(pairs, [2]string{key, val.String()})
	}
}

func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\f\v'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// Unquoted returns msg up to the first thing it quotes. Parsers quote the
// piece of input they stumbled on ("invalid port \":pw\" after host"),
// which may be a piece of a password.
func Unquoted(msg string) string {
	if i := strings.IndexAny(msg, "\"'`"); i >= 0 {
		return strings.TrimRight(msg[:i], " :")
	}
	return msg
}

// ParseError is what url.Parse said about raw, safe to print: the reason
// without the URL, and without the piece it quotes when that piece could
// come from the user info. Parse checks the query only later, so it never
// quotes one.
func ParseError(raw string, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if strings.Contains(raw, "@") {
		return Unquoted(err.Error())
	}
	return err.Error()
}

// Error is an error whose message was written to be safe to print, with
// the original error kept for errors.Is and errors.As. Its Unwrap gives the
// original, whose own message must not be printed.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }
