package policy

import (
	"fmt"
	"net/netip"
	"path"
	"strings"
)

// Programs that talk to the network.

func registerNet() {
	net := func(names string, rule ruleID, reason string, fn func(w *walker, c *call)) {
		reg(names, program{decision: Confirm, rule: rule, reason: reason, check: func(w *walker, c *call) {
			c.network = true
			if fn != nil {
				fn(w, c)
			}
		}})
	}
	net("curl", ruleDownload, "curl fetches data from the network; approval is needed", checkCurl)
	readsArgs("curl", curlSpec)
	net("wget", ruleDownload, "wget fetches data from the network; approval is needed", checkWget)
	readsArgs("wget", wgetSpec)
	net("aria2c axel lwp-request lynx w3m links elinks http https xh httpie curlie fetch", ruleDownload, "%s fetches data from the network; approval is needed", nil)
	net("nc ncat netcat nc.openbsd nc.traditional", ruleNetwork, "%s opens a raw network connection; approval is needed", checkNetcat)
	readsArgs("nc ncat netcat nc.openbsd nc.traditional", netcatArgs)
	net("socat", ruleNetwork, "socat relays data over the network; approval is needed", checkSocat)
	net("telnet ftp lftp tftp sftp smbclient mosh rlogin rsh rexec", ruleNetwork, "%s connects to another machine; approval is needed", nil)
	net("ssh", ruleSsh, "ssh connects to another machine; approval is needed", checkSSH)
	net("scp", ruleSsh, "scp copies files to or from another machine; approval is needed", checkScp)
	net("rsync", ruleNetwork, "rsync copies files; to or from another machine it needs approval", checkRsync)
	net("ping ping6 arping traceroute traceroute6 tracepath mtr dig host nslookup drill whois", ruleNetwork, "%s sends packets to another host; approval is needed", nil)
	net("nmap masscan zmap nikto sqlmap hydra", ruleNetworkScan, "%s scans or attacks other machines; approval is needed", nil)
	net("tcpdump tshark wireshark ngrep", ruleNetworkCapture, "%s captures network traffic; approval is needed", func(w *walker, c *call) {
		// -r FILE reads a saved capture: no traffic is captured (ngrep's
		// is -I).
		read := "-r"
		if c.name == "ngrep" {
			read = "-I"
		}
		live := false
		for _, a := range c.args() {
			if a.s == "-i" || strings.HasPrefix(a.s, "--interface") || a.s == "-w" && c.name != "ngrep" || a.s == "-O" && c.name == "ngrep" {
				live = true
			}
		}
		for _, a := range c.args() {
			if (a.s == read || strings.HasPrefix(a.s, read) && len(a.s) > 2 && c.name != "ngrep") && !live {
				c.network = false
				w.add(Allow, ruleNetworkCapture, c.name+" "+read+" reads a saved capture file; it captures nothing", c.part)
				return
			}
		}
	})
	net("mail mailx sendmail mutt msmtp swaks", ruleNetwork, "%s sends email; approval is needed", nil)
	net("gh glab hub tea", ruleForge, "%s talks to the code host with the user's credentials; approval is needed", checkForge)
	net("ssh-copy-id", ruleSsh, "ssh-copy-id installs a key on another machine; approval is needed", nil)
	net("ngrok cloudflared localtunnel lt bore frpc chisel inlets rathole zrok pinggy", ruleTunnel, "%s exposes this machine to the internet through a tunnel, a way in for anyone; do not open tunnels — ask the user to expose what they need", func(w *walker, c *call) {
		if versionOnly(c) || len(c.args()) == 1 && (c.args()[0].s == "version" || c.args()[0].s == "help") {
			w.add(Allow, ruleInfo, c.name+" "+c.args()[0].s+" prints its version or help", c.part)
			return
		}
		w.add(Deny, ruleTunnel, c.name+" exposes this machine to the internet through a tunnel, a way in for anyone; do not open tunnels — ask the user to expose what they need", c.part)
	})
	reg("openssl", program{decision: Allow, rule: ruleCrypto, reason: "openssl works on keys, certificates and data locally", check: checkOpenssl})
	reg("wall write", program{decision: Confirm, rule: ruleMessage, reason: "%s writes to other users' terminals; approval is needed"})
}

// urlHost is the host a URL names, as curl reads it: after the scheme, before
// the path, query or fragment, without user information, port or brackets. A
// "@" in the query is not user information: http://evil.example?@127.0.0.1/ goes
// to evil.example.
func urlHost(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if j := strings.IndexAny(u, "/?#"); j >= 0 {
		u = u[:j]
	}
	if i := strings.LastIndexByte(u, '@'); i >= 0 {
		u = u[i+1:]
	}
	if strings.HasPrefix(u, "[") {
		if j := strings.IndexByte(u, ']'); j > 0 {
			return strings.ToLower(u[1:j])
		}
	} else if j := strings.IndexByte(u, ':'); j >= 0 {
		u = u[:j]
	}
	return strings.ToLower(u)
}

// isLocalURL reports whether a URL names this machine.
func isLocalURL(u string) bool {
	host := urlHost(u)
	switch host {
	case "localhost", "127.0.0.1", "0.0.0.0", "::1", "host.docker.internal":
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback() || ip.IsUnspecified()
	}
	return strings.HasSuffix(host, ".localhost")
}

// metadataURL reports whether a URL names a cloud provider's instance metadata
// service, which hands out the machine's credentials.
func metadataURL(u string) bool {
	switch urlHost(u) {
	case "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "metadata.google.internal", "metadata",
		"100.100.100.200", "169.254.169.123", "metadata.azure.internal":
		return true
	}
	return false
}

// metadataCheck denies a request to the cloud metadata service.
func (w *walker) metadataCheck(c *call, urls []field) bool {
	for _, u := range urls {
		if u.known() && metadataURL(u.s) {
			w.add(Deny, ruleSecretRead, fmt.Sprintf("%s would query the cloud metadata service (%s), which hands out the machine's cloud credentials; credentials must not be read — ask the user if the task needs them", c.name, u.show()), c.part)
			return true
		}
	}
	return false
}

var curlSpec = spec("oTdFHuXAeKrbcwmxEyYzQtCUP",
	"--output", "--upload-file", "--data", "--data-binary", "--data-raw", "--data-ascii", "--data-urlencode",
	"--form", "--form-string", "--header", "--user", "--request", "--user-agent", "--referer", "--config",
	"--range", "--cookie", "--cookie-jar", "--write-out", "--max-time", "--proxy", "--cert", "--key",
	"--url", "--output-dir", "--json", "--connect-timeout", "--retry", "--resolve", "--cacert", "--capath",
	"--dump-header", "--trace", "--trace-ascii", "--stderr", "--netrc-file", "--oauth2-bearer", "--proxy-user",
	"--variable", "--expand-url", "--limit-rate", "--interface", "--local-port", "--unix-socket", "--abstract-unix-socket",
	"--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--connect-to", "--doh-url")

// versionOnly reports whether a program is asked only for its version or help.
func versionOnly(c *call) bool {
	args := c.args()
	if len(args) == 0 {
		return false
	}
	for _, a := range args {
		switch a.s {
		case "--version", "-V", "--help", "-h", "--manual", "-M":
		default:
			return false
		}
	}
	return true
}

func checkCurl(w *walker, c *call) {
	if versionOnly(c) {
		w.add(Allow, ruleInfo, "curl "+c.args()[0].s+" prints curl's version or help", c.part)
		return
	}
	p := parseArgs(c.args(), curlSpec)
	urls := append(p.values("--url"), p.ops...)
	w.metadataCheck(c, urls)
	local := len(urls) > 0
	for _, u := range urls {
		if !isLocalURL(u.s) {
			local = false
		}
		if strings.HasPrefix(strings.ToLower(u.s), "file://") {
			f := u
			f.s = strings.TrimPrefix(u.s, u.s[:7])
			w.pathOp(opRead, f, "curl", false)
		}
	}
	for _, o := range p.values("-o", "--output", "--dump-header", "-D", "--trace", "--trace-ascii", "-c", "--cookie-jar", "--stderr") {
		if o.s == "-" {
			continue
		}
		w.pathOp(opWrite, o, actor(c), false)
		w.download(o)
	}
	for _, d := range p.values("--output-dir") {
		w.pathOp(opWrite, d, actor(c), false)
	}
	if p.has("-O", "--remote-name", "--remote-name-all") {
		for _, u := range urls {
			w.download(lit(urlBase(u.s)))
		}
	}
	for _, f := range p.values("-T", "--upload-file") {
		if f.s != "-" {
			w.pathOp(opCopy, f, actor(c), false)
		}
		if !local {
			w.add(Confirm, ruleUpload, fmt.Sprintf("curl uploads %s to another machine; approval is needed", f.show()), c.part)
		}
	}
	for _, f := range p.values("-K", "--config", "--netrc-file") {
		w.add(Confirm, ruleDownload, "curl "+f.show()+" reads options or credentials from a file; approval is needed", c.part)
	}
	if len(p.values("-x", "--proxy", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--resolve", "--connect-to", "--doh-url")) > 0 {
		local = false // the request goes elsewhere
	}
	if local {
		w.add(Confirm, ruleLocalHttp, "curl sends a request to a server on this machine; network requests need approval — run the server's tests, or ask", c.part)
		return
	}
	if len(p.values("-d", "--data", "--data-binary", "--data-raw", "--data-ascii", "--data-urlencode", "-F", "--form", "--json")) > 0 {
		w.add(Confirm, ruleUpload, "curl sends data to another machine; approval is needed", c.part)
		return
	}
	for _, m := range p.values("-X", "--request") {
		switch strings.ToUpper(m.s) {
		case "GET", "HEAD", "OPTIONS":
		default:
			w.add(Confirm, ruleUpload, fmt.Sprintf("curl sends a %s request, which changes something on another machine, out of the checkpoint's reach; approval is needed", m.show()), c.part)
			return
		}
	}
	target := "the network"
	if len(urls) > 0 {
		target = urls[0].show()
	}
	w.add(Confirm, ruleDownload, fmt.Sprintf("curl fetches %s from the network; approval is needed", target), c.part)
}

// urlBase is the file name curl -O and wget give a download.
func urlBase(u string) string {
	u, _, _ = strings.Cut(u, "?")
	u, _, _ = strings.Cut(u, "#")
	b := path.Base(u)
	if b == "." || b == "/" || strings.Contains(b, ":") {
		return "index.html"
	}
	return b
}

// download remembers a file (or a directory, cloned) fetched from the
// network, so that running it later in the same command is seen.
func (w *walker) download(f field) { w.wrote(f, dDownload) }

// wrote remembers that a file was filled with data of a kind.
func (w *walker) wrote(f field, k dataKind) {
	if !f.known() {
		return
	}
	if w.written == nil {
		w.written = map[string]dataKind{}
	}
	w.written[w.canon(f.s)] |= k
}

// wroteData remembers what a command wrote into a file: its kind, and its
// text when it is known, so that running the file later is running that text.
func (w *walker) wroteData(f field, d data, appended bool) {
	if !f.known() {
		return
	}
	if d.kind&(dDownload|dDecoded|dEnv|dSecret) != 0 {
		w.wrote(f, d.kind)
	}
	c := w.canon(f.s)
	if w.scripts == nil {
		w.scripts = map[string]string{}
	}
	if d.hasText && buildFileOf(c) != "" {
		w.plantBuildFile(c, d.text)
	}
	switch {
	case d.hasText && len(d.text) <= maxScript && len(w.scripts) < 64:
		if appended {
			if old, ok := w.scripts[c]; ok {
				w.scripts[c] = old + d.text
				return
			}
			// Appended to a file whose start is unknown: the text still runs.
		}
		w.scripts[c] = d.text
	default:
		delete(w.scripts, c)
	}
}

// writtenKind says what a canonical path was filled with earlier in the
// command (a file, or a directory cloned into), if anything.
func (w *walker) writtenKind(c string) dataKind {
	var k dataKind
	for d, dk := range w.written {
		if c == d || strings.HasPrefix(c, d+"/") || d == "." {
			k |= dk
		}
	}
	return k
}

// downloaded reports whether a canonical path was fetched from the network
// or decoded earlier in the command, or lies in a directory that was.
func (w *walker) downloaded(c string) bool {
	return w.writtenKind(c)&(dDownload|dDecoded) != 0
}

// madeHow says how a file the command runs unread was made.
func (w *walker) madeHow(c string) string {
	if w.writtenKind(c)&dDownload != 0 {
		return "downloaded earlier in this command"
	}
	return "made earlier in this command by decoding or rewriting text written in it, which hides what runs"
}

func (w *walker) madeAdvice(c string) string {
	if w.writtenKind(c)&dDownload != 0 {
		return "download it, read it, then run it as a separate step"
	}
	return "write the script plainly, or make it in one step and run it in the next"
}

var wgetSpec = spec("OoaPeiBtTwQUYlADRIXkH",
	"--output-document", "--output-file", "--append-output", "--directory-prefix", "--execute", "--input-file",
	"--base", "--tries", "--timeout", "--wait", "--quota", "--user-agent", "--level", "--accept", "--domains",
	"--reject", "--include-directories", "--exclude-directories", "--post-data", "--post-file", "--body-data",
	"--body-file", "--header", "--user", "--password", "--method", "--load-cookies", "--save-cookies", "--ca-certificate",
	"--certificate", "--private-key", "--use-askpass")

func checkWget(w *walker, c *call) {
	if versionOnly(c) {
		w.add(Allow, ruleInfo, "wget "+c.args()[0].s+" prints wget's version or help", c.part)
		return
	}
	p := parseArgs(c.args(), wgetSpec)
	w.metadataCheck(c, p.ops)
	local := len(p.ops) > 0
	for _, u := range p.ops {
		if !isLocalURL(u.s) {
			local = false
		}
	}
	outs := p.values("-O", "--output-document")
	for _, o := range outs {
		if o.s == "-" {
			continue
		}
		w.pathOp(opWrite, o, actor(c), false)
		w.download(o)
	}
	dir := ""
	for _, d := range p.values("-P", "--directory-prefix") {
		w.pathOp(opWrite, d, actor(c), false)
		dir = d.s + "/"
	}
	if len(outs) == 0 {
		for _, u := range p.ops {
			w.download(lit(dir + urlBase(u.s)))
		}
	}
	for _, f := range p.values("--post-file", "--body-file", "--load-cookies", "--private-key") {
		w.pathOp(opCopy, f, actor(c), false)
	}
	for _, f := range p.values("--use-askpass") {
		w.programString(f, c.part, "wget --use-askpass")
	}
	if local {
		w.add(Confirm, ruleLocalHttp, "wget sends a request to a server on this machine; network requests need approval — run the server's tests, or ask", c.part)
		return
	}
	target := "the network"
	if len(p.ops) > 0 {
		target = p.ops[0].show()
	}
	w.add(Confirm, ruleDownload, fmt.Sprintf("wget fetches %s from the network; approval is needed", target), c.part)
}

// netcatArgs is how the netcats (traditional, OpenBSD, ncat) read their
// arguments; -e and -c run a program on the connection.
var netcatArgs = spec("ecipqswxXIOTVmMPgG", "--exec", "--sh-exec", "--lua-exec", "--source", "--source-port",
	"--wait", "--idle-timeout", "--proxy", "--proxy-type", "--proxy-auth", "--output", "--hex-dump", "--max-conns",
	"--allow", "--allowfile", "--deny", "--denyfile").withFlags("--listen", "--keep-open", "--udp", "--verbose")

func checkNetcat(w *walker, c *call) {
	p := c.opts()
	for _, o := range p.opts {
		switch o.name {
		case "-e", "-c", "--exec", "--sh-exec", "--lua-exec":
			w.add(Deny, ruleReverseShell, fmt.Sprintf("%s %s connects a program's input and output to the network (a reverse or bind shell); run the commands you need directly", c.name, o.name), c.part)
			return
		}
	}
	if p.has("-l", "--listen") {
		w.add(Confirm, ruleListen, c.name+" -l listens for connections from other machines; approval is needed", c.part)
		return
	}
	w.add(Confirm, ruleNetwork, c.name+" opens a raw network connection; approval is needed", c.part)
}

func checkSocat(w *walker, c *call) {
	for _, a := range c.args() {
		l := strings.ToLower(a.s)
		if strings.HasPrefix(l, "exec:") || strings.HasPrefix(l, "system:") || strings.Contains(l, ",exec:") {
			w.add(Deny, ruleReverseShell, "socat "+a.show()+" runs a program connected to a socket (a reverse or bind shell); run the commands you need directly", c.part)
			return
		}
	}
	w.add(Confirm, ruleNetwork, "socat relays data over the network; approval is needed", c.part)
}

var sshSpec = spec("BbcDEeFIiJLlmOopQRSWw")

// sshOptions classifies the -o options of ssh, scp and sftp: several name a
// program that runs on this machine.
func (w *walker) sshOptions(c *call, p parsed) {
	for _, o := range p.values("-o") {
		key, val, ok := strings.Cut(o.s, "=")
		if !ok {
			key, val, _ = strings.Cut(strings.TrimSpace(o.s), " ")
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "proxycommand", "localcommand", "knownhostscommand", "remotecommand":
			w.add(Confirm, ruleSshProgram, fmt.Sprintf("%s -o %s runs a program on this machine; connect without it", c.name, key), c.part)
			f := o
			f.s = strings.TrimSpace(val)
			w.programString(f, c.part, c.name+" "+key)
		}
	}
	for range p.values("-F") {
		w.add(Confirm, ruleSshProgram, c.name+" -F reads a configuration file that can run programs; approval is needed", c.part)
	}
}

func checkSSH(w *walker, c *call) {
	c.judgedPaths = true // -i names a key ssh uses, not one it sends
	p := parseArgs(c.args(), sshSpec.firstOperand())
	w.sshOptions(c, p)
	if len(p.values("-R")) > 0 {
		w.add(Deny, ruleSshReverseTunnel, "ssh -R opens a tunnel from another machine back into this one, exposing it; do not open tunnels", c.part)
	}
	if len(p.values("-L", "-D", "-w")) > 0 {
		w.add(Confirm, ruleSshTunnel, "ssh opens a network tunnel; approval is needed", c.part)
	}
	if len(p.ops) == 0 {
		return
	}
	host := p.ops[0].show()
	if len(p.ops) > 1 {
		w.add(Confirm, ruleSsh, fmt.Sprintf("ssh runs a command on %s, another machine; approval is needed", host), c.part)
		w.script(joinFields(p.ops[1:]), c.part)
		return
	}
	w.add(Confirm, ruleSsh, fmt.Sprintf("ssh logs in to %s, another machine; approval is needed", host), c.part)
}

// isRemote reports whether an scp or rsync operand names another machine.
func isRemote(s string) bool {
	if strings.HasPrefix(s, "rsync://") || strings.HasPrefix(s, "scp://") || strings.HasPrefix(s, "sftp://") {
		return true
	}
	i := strings.IndexByte(s, ':')
	j := strings.IndexByte(s, '/')
	return i > 0 && (j < 0 || i < j)
}

// copySources judges the local sources of an scp or rsync copy to dest: each
// is read, and a project's environment file sent to another machine is denied.
func (w *walker) copySources(c *call, srcs []field, dest field) {
	for _, src := range srcs {
		if isRemote(src.s) {
			continue
		}
		w.pathOp(opCopy, src, actor(c), false)
		if isRemote(dest.s) {
			w.sendsDotenv(c, src)
		}
	}
}

func checkScp(w *walker, c *call) {
	p := parseArgs(c.args(), spec("cFiJloPSXD"))
	w.sshOptions(c, p)
	for _, s := range p.values("-S") {
		w.add(Confirm, ruleSshProgram, "scp -S runs a program instead of ssh; approval is needed", c.part)
		w.programString(s, c.part, "scp -S")
	}
	c.judgedPaths = true
	ops := p.ops
	if len(ops) == 0 {
		return
	}
	dest := ops[len(ops)-1]
	w.copySources(c, ops[:len(ops)-1], dest)
	if !isRemote(dest.s) {
		w.pathOp(opWrite, dest, actor(c), false)
	}
	w.add(Confirm, ruleSsh, "scp copies files to or from another machine; approval is needed", c.part)
}

var rsyncSpec = spec("eBfTM",
	"--rsh", "--rsync-path", "--exclude", "--include", "--filter", "--files-from", "--log-file", "--password-file",
	"--backup-dir", "--compare-dest", "--link-dest", "--copy-dest", "--temp-dir", "--chmod", "--chown", "--partial-dir",
	"--bwlimit", "--port", "--timeout", "--out-format", "--info", "--debug", "--max-size", "--min-size", "--usermap",
	"--groupmap", "--iconv", "--sockopts", "--suffix", "--exclude-from", "--include-from", "--remote-option", "--address")

func checkRsync(w *walker, c *call) {
	p := parseArgs(c.args(), rsyncSpec)
	for _, o := range p.values("-e", "--rsh") {
		w.add(Confirm, ruleSshProgram, "rsync -e runs a program as the remote shell; approval is needed", c.part)
		w.programString(o, c.part, "rsync -e")
	}
	for _, o := range p.values("--rsync-path") {
		w.add(Confirm, ruleSshProgram, "rsync --rsync-path runs a program on the other machine; approval is needed", c.part)
		w.programString(o, c.part, "rsync --rsync-path")
	}
	for _, f := range p.values("--password-file", "--files-from", "--exclude-from", "--include-from") {
		w.pathOp(opRead, f, actor(c), false)
	}
	c.judgedPaths = true
	ops := p.ops
	remote := false
	for _, o := range ops {
		if isRemote(o.s) {
			remote = true
		}
	}
	del := false
	for _, o := range p.opts {
		if strings.HasPrefix(o.name, "--delete") || o.name == "--remove-source-files" {
			del = true
		}
	}
	if len(ops) >= 2 {
		dest := ops[len(ops)-1]
		w.copySources(c, ops[:len(ops)-1], dest)
		if !isRemote(dest.s) {
			if del {
				w.pathOp(opDeleteTree, dest, "rsync --delete", false)
			} else {
				w.pathOp(opWrite, dest, actor(c), false)
			}
		}
	}
	if remote {
		w.add(Confirm, ruleNetwork, "rsync copies files to or from another machine; approval is needed", c.part)
	} else {
		c.network = false
	}
}

func checkForge(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 {
		return
	}
	sub := args[0].s
	next := ""
	if len(args) > 1 {
		next = args[1].s
	}
	switch {
	case sub == "--version" || sub == "version" || sub == "help" || sub == "--help":
		c.network = false
		w.add(Allow, ruleInfo, c.name+" prints help or its version", c.part)
	case sub == "auth" && next == "token":
		w.add(Deny, ruleSecretRead, c.name+" auth token prints the user's access token; credentials must not be read or sent — ask the user if the task needs them", c.part)
	case sub == "auth":
		w.add(Confirm, ruleForge, c.name+" auth changes or shows the user's login; approval is needed", c.part)
	case sub == "extension" || sub == "ext":
		w.add(Confirm, rulePackageInstall, c.name+" extension installs or runs extensions from the network; approval is needed", c.part)
	case sub == "gist" && next == "create", sub == "release" && next == "upload":
		w.add(Confirm, ruleUpload, fmt.Sprintf("%s %s %s publishes files; approval is needed", c.name, sub, next), c.part)
	default:
		w.add(Confirm, ruleForge, fmt.Sprintf("%s %s talks to the code host with the user's credentials; approval is needed", c.name, sub), c.part)
	}
}

func checkOpenssl(w *walker, c *call) {
	args := c.args()
	if len(args) == 0 {
		return
	}
	switch args[0].s {
	case "rand":
		// openssl rand -out FILE N: a file of N bytes.
		p := parseArgs(args[1:], spec("", "-out", "-rand", "-writerand", "-engine", "-provider").wholeWords())
		if outs := p.values("-out"); len(outs) > 0 && len(p.ops) > 0 {
			for _, f := range outs {
				w.pathOp(opWrite, f, actor(c), false)
			}
			size, known := parseSize(p.ops[0].s, false)
			w.bigFile(c, "openssl rand", size, known)
		}
	case "s_client", "s_server", "s_time", "ocsp":
		c.network = true
		w.add(Confirm, ruleNetwork, "openssl "+args[0].s+" connects to another machine; approval is needed", c.part)
	}
}
