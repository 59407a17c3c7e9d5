package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Secret is a credential the proxy puts into requests for the hosts bound to
// it, in place of its placeholder, so that the sandbox never holds its value.
//
// The sandbox is given the placeholder (Proxy.Placeholders). The proxy puts
// the value in only on a TLS connection it terminates itself for one of
// Hosts, port 443, opened by name (CONNECT or SOCKS), whose ClientHello names
// the host and whose upstream certificate it verified, and only in the
// headers of a request whose Host (or :authority) is that host: in a header's
// value, and inside "Authorization: Basic" (the base64 of user:password that
// git and curl send). Never in the URL, the query or the body, never on
// plain HTTP, never for another host. Responses come back with the value, in
// headers and body, replaced by the placeholder.
type Secret struct {
	// Value is the credential. At least MinSecretLen bytes, no control
	// characters. It is never encoded or printed (see String).
	Value string `json:"-"`
	// Hosts are the names the value may go to: exact host names, no
	// wildcards, no addresses.
	Hosts []string `json:"hosts"`
	// Placeholder is what the sandbox sees; made by Placeholder(Value) when
	// empty. It must have the value's length.
	Placeholder string `json:"placeholder,omitempty"`
}

// String describes s without its value.
func (s Secret) String() string {
	return fmt.Sprintf("secret for %s (%d characters)", strings.Join(s.Hosts, ", "), len(s.Value))
}

// GoString describes s without its value, for %#v.
func (s Secret) GoString() string { return s.String() }

// ErrSecret marks a Secret the proxy refuses.
var ErrSecret = errors.New("bad secret")

// MinSecretLen is the shortest value a Secret may have: responses are masked
// by searching for the value, so a short one would mask common text.
const MinSecretLen = 8

// MaxSecretLen is the longest value a Secret may have.
const MaxSecretLen = 16 << 10

// Withheld is the verdict of a record that reports a secret's placeholder seen
// where its value may not go: the request went on with the placeholder as it
// was.
const Withheld = "withhold"

// knownPrefixes are the fixed starts of credentials that tools recognise by
// shape; a placeholder keeps them. Longer ones first.
var knownPrefixes = []string{
	"github_pat_", "sk-proj-", "sk-ant-", "glpat-", "xoxb-", "xoxp-", "xapp-",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_", "pypi-", "sk-", "hf_",
	"AKIA", "ASIA", "glrt-", "dop_v1_",
}

// Placeholder returns a random string of value's shape: the same length, a
// known prefix (ghp_, glpat-, sk-, …) kept, every other letter or digit
// replaced by a random one of its class (lower case, upper case, digit), and
// every other byte kept. It differs from value wherever value has a letter or
// digit after its prefix.
func Placeholder(value string) string {
	b := []byte(value)
	start := 0
	for _, p := range knownPrefixes {
		if strings.HasPrefix(value, p) {
			start = len(p)
			break
		}
	}
	for {
		same := true
		for i := start; i < len(b); i++ {
			var class string
			switch c := value[i]; {
			case c >= 'a' && c <= 'z':
				class = "abcdefghijklmnopqrstuvwxyz"
			case c >= 'A' && c <= 'Z':
				class = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			case c >= '0' && c <= '9':
				class = "0123456789"
			default:
				continue
			}
			b[i] = class[randInt(len(class))]
			same = same && b[i] == value[i]
		}
		if !same || start == len(b) || !hasAlnum(value[start:]) {
			return string(b)
		}
	}
}

func hasAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return true
		}
	}
	return false
}

func randInt(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		panic("egress: no randomness: " + err.Error())
	}
	return int(v.Int64())
}

// secret is a Secret as the proxy keeps it.
type secret struct {
	name        string
	value       string
	placeholder string
	hosts       map[string]bool
}

// secretSet is a proxy's secrets, by name.
type secretSet struct {
	list  []*secret       // sorted by name
	hosts map[string]bool // every host bound to some secret
}

// strongPlaceholder: a placeholder must carry this many random letters or
// digits, so that it cannot be guessed.
const strongPlaceholder = 6

// newSecretSet checks the secrets and makes the missing placeholders.
func newSecretSet(secrets map[string]Secret) (*secretSet, error) {
	s := &secretSet{hosts: map[string]bool{}}
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sec := secrets[name]
		if !validSecretName(name) {
			return nil, fmt.Errorf("%w %q: a name is an environment variable's: letters, digits and _, not starting with a digit", ErrSecret, name)
		}
		if len(sec.Value) < MinSecretLen {
			return nil, fmt.Errorf("%w %s: its value is shorter than %d characters", ErrSecret, name, MinSecretLen)
		}
		if len(sec.Value) > MaxSecretLen {
			return nil, fmt.Errorf("%w %s: its value is longer than %d characters", ErrSecret, name, MaxSecretLen)
		}
		for i := 0; i < len(sec.Value); i++ {
			if c := sec.Value[i]; c < 0x20 || c == 0x7f {
				return nil, fmt.Errorf("%w %s: its value holds a control character (a trailing newline?)", ErrSecret, name)
			}
		}
		if len(sec.Hosts) == 0 {
			return nil, fmt.Errorf("%w %s: no host to send it to", ErrSecret, name)
		}
		ss := &secret{name: name, value: sec.Value, placeholder: sec.Placeholder, hosts: map[string]bool{}}
		if ss.placeholder == "" {
			ss.placeholder = Placeholder(sec.Value)
		}
		if len(ss.placeholder) != len(ss.value) || ss.placeholder == ss.value {
			return nil, fmt.Errorf("%w %s: its placeholder must be as long as the value and differ from it", ErrSecret, name)
		}
		if randomChars(ss.placeholder, ss.value) < strongPlaceholder {
			return nil, fmt.Errorf("%w %s: its value has too few letters and digits to hide behind a placeholder", ErrSecret, name)
		}
		for _, h := range sec.Hosts {
			if err := checkSecretHost(h); err != nil {
				return nil, fmt.Errorf("%w %s: %v", ErrSecret, name, err)
			}
			hn, _ := canonName(h)
			ss.hosts[hn] = true
			s.hosts[hn] = true
		}
		for _, o := range s.list {
			if strings.Contains(o.value, ss.placeholder) || strings.Contains(ss.value, o.placeholder) ||
				strings.Contains(o.placeholder, ss.placeholder) || strings.Contains(ss.placeholder, o.placeholder) {
				return nil, fmt.Errorf("%w: %s and %s overlap: one's value or placeholder holds the other's", ErrSecret, o.name, name)
			}
		}
		s.list = append(s.list, ss)
	}
	return s, nil
}

// randomChars counts the positions where a placeholder was drawn at random:
// the letters and digits after a known prefix.
func randomChars(placeholder, value string) int {
	start := 0
	for _, p := range knownPrefixes {
		if strings.HasPrefix(value, p) && strings.HasPrefix(placeholder, p) {
			start = len(p)
			break
		}
	}
	n := 0
	for i := start; i < len(value); i++ {
		if c := value[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			n++
		}
	}
	return n
}

// checkSecretHost says why h cannot be a secret's host, or nil.
func checkSecretHost(h string) error {
	if isAddr(h) {
		return fmt.Errorf("%q is an address; a secret is bound to host names, which TLS certificates name", h)
	}
	if strings.Contains(h, "*") || strings.Contains(h, ":") {
		return fmt.Errorf("%q: a secret's host is one name, without wildcard or port (it goes to port 443)", h)
	}
	if _, err := canonName(h); err != nil {
		return fmt.Errorf("%q: %v", h, err)
	}
	return nil
}

// ValidSecretName says whether s can name a secret: an environment
// variable's name.
func ValidSecretName(s string) bool { return validSecretName(s) }

func validSecretName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// bound says whether some secret is bound to host (a canonical name).
func (s *secretSet) bound(host string) bool {
	return s != nil && s.hosts[host]
}

// sighting is a placeholder seen in a request.
type sighting struct {
	sec   *secret
	where string // "header X", "URL", "Basic authorization"
}

// scan lists the placeholders a request carries in its URL and headers
// (Authorization's Basic form decoded), once per secret and place.
func (s *secretSet) scan(u *url.URL, h http.Header) []sighting {
	if s == nil {
		return nil
	}
	var out []sighting
	seen := map[string]bool{}
	add := func(sec *secret, where string) {
		if k := sec.name + "\x00" + where; !seen[k] {
			seen[k] = true
			out = append(out, sighting{sec, where})
		}
	}
	uri := ""
	if u != nil {
		uri = u.String()
		if q, err := url.PathUnescape(uri); err == nil {
			uri += "\x00" + q
		}
	}
	for _, sec := range s.list {
		if uri != "" && strings.Contains(uri, sec.placeholder) {
			add(sec, "the URL")
		}
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, sec.placeholder) {
					add(sec, "header "+k)
				} else if user, pass, ok := basicAuth(k, v); ok && strings.Contains(user+":"+pass, sec.placeholder) {
					add(sec, "header "+k)
				}
			}
		}
	}
	return out
}

// basicAuth decodes the Basic form of an Authorization header.
func basicAuth(key, v string) (string, string, bool) {
	if !strings.EqualFold(key, "Authorization") {
		return "", "", false
	}
	scheme, enc, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", "", false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	return user, pass, ok
}

// substitute puts into h the values of the secrets bound to host in place of
// their placeholders, in place. It returns the names put in, and the pairs
// (the value as sent, the value as the client wrote it) a response must have
// masked back: the Basic form changes as a whole.
func (s *secretSet) substitute(host string, h http.Header) (names []string, mask [][2]string) {
	used := map[string]bool{}
	for k, vs := range h {
		for i, v := range vs {
			nv := v
			for _, sec := range s.list {
				if sec.hosts[host] && strings.Contains(nv, sec.placeholder) {
					nv = strings.ReplaceAll(nv, sec.placeholder, sec.value)
					used[sec.name] = true
				}
			}
			if user, pass, ok := basicAuth(k, nv); ok {
				cred := user + ":" + pass
				nc := cred
				for _, sec := range s.list {
					if sec.hosts[host] && strings.Contains(nc, sec.placeholder) {
						nc = strings.ReplaceAll(nc, sec.placeholder, sec.value)
						used[sec.name] = true
					}
				}
				if nc != cred {
					scheme, _, _ := strings.Cut(strings.TrimSpace(nv), " ")
					enc := base64.StdEncoding.EncodeToString([]byte(nc))
					orig := base64.StdEncoding.EncodeToString([]byte(cred))
					nv = scheme + " " + enc
					mask = append(mask, [2]string{enc, orig})
				}
			}
			vs[i] = nv
		}
	}
	for _, sec := range s.list {
		if used[sec.name] {
			names = append(names, sec.name)
		}
	}
	return names, mask
}

// masks are the pairs every response is masked with: each value, and its
// placeholder.
func (s *secretSet) masks() [][2]string {
	var m [][2]string
	for _, sec := range s.list {
		m = append(m, [2]string{sec.value, sec.placeholder})
	}
	return m
}

// maskHeader replaces in h each pair's first string by its second.
func maskHeader(h http.Header, pairs [][2]string) {
	for _, vs := range h {
		for i, v := range vs {
			for _, p := range pairs {
				v = strings.ReplaceAll(v, p[0], p[1])
			}
			vs[i] = v
		}
	}
}

// maskReader replaces, in what it reads, each pair's first string by its
// second, which has the same length, across the boundaries of reads: it holds
// back the last bytes of what it read (one less than the longest pair) until
// more comes or the body ends.
type maskReader struct {
	mu    sync.Mutex // Close may come from another goroutine than Read
	r     io.ReadCloser
	pairs [][2][]byte
	keep  int
	buf   []byte
	off   int // buf[off:ready] is masked and may be given out,
	ready int // buf[ready:] is held back
	err   error
	// atEnd, when not nil, is called once the body has ended (to mask
	// its trailers).
	atEnd func()
}

func newMaskReader(r io.ReadCloser, pairs [][2]string) *maskReader {
	m := &maskReader{r: r}
	for _, p := range pairs {
		if len(p[0]) != len(p[1]) || p[0] == "" {
			panic("egress: a mask changes the length")
		}
		m.pairs = append(m.pairs, [2][]byte{[]byte(p[0]), []byte(p[1])})
		m.keep = max(m.keep, len(p[0])-1)
	}
	return m
}

// maskChunk is the most a maskReader reads at once; its buffer holds two,
// room for what it held back and a chunk.
const maskChunk = 64 << 10

var maskBufs = sync.Pool{New: func() any { return new([2 * maskChunk]byte) }}

// release gives the buffer back once the body is done with.
func (m *maskReader) release() {
	if m.buf != nil {
		maskBufs.Put((*[2 * maskChunk]byte)(m.buf[:2*maskChunk]))
		m.buf, m.off, m.ready = nil, 0, 0
	}
}

func (m *maskReader) Read(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.off == m.ready {
		held := copy(m.buf, m.buf[m.ready:])
		m.buf, m.off, m.ready = m.buf[:held], 0, 0
		if m.err != nil {
			if held == 0 {
				if m.atEnd != nil {
					m.atEnd()
					m.atEnd = nil
				}
				m.release()
				return 0, m.err
			}
			m.ready = held // the end: what was held cannot grow into a match
			break
		}
		if m.buf == nil {
			m.buf = maskBufs.Get().(*[2 * maskChunk]byte)[:0]
		}
		n, err := m.r.Read(m.buf[held:cap(m.buf)])
		m.buf = m.buf[:held+n]
		m.err = err
		if n > 0 {
			m.mask() // from the start: a match may begin in what was held
		}
		if err == nil {
			m.ready = max(0, len(m.buf)-m.keep)
		}
	}
	n := copy(b, m.buf[m.off:m.ready])
	m.off += n
	return n, nil
}

// mask replaces the matches in buf.
func (m *maskReader) mask() {
	for _, p := range m.pairs {
		for i := 0; ; {
			j := bytes.Index(m.buf[i:], p[0])
			if j < 0 {
				break
			}
			copy(m.buf[i+j:], p[1])
			i += j + len(p[0])
		}
	}
}

func (m *maskReader) Close() error {
	err := m.r.Close() // ends a Read in progress
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = io.ErrClosedPipe
	}
	m.release()
	return err
}

// secretNames joins names for a record.
func secretNames(fs []sighting) string {
	var names []string
	for _, f := range fs {
		if !containsString(names, f.sec.name) {
			names = append(names, f.sec.name)
		}
	}
	return strings.Join(names, ", ")
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
