package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// Programs that act on the machine: processes, services, disks, users,
// schedules; and the shell builtins whose arguments matter.

func registerChecks() {
	registerFS()
	registerWrap()
	registerNet()
	registerDev()
	registerSys()
	registerRunners()
	registerBuiltins()
	registerDisk()
}

func registerSys() {
	deny := func(names string, rule ruleID, reason string) {
		reg(names, program{decision: Deny, rule: rule, reason: reason})
	}
	deny("shutdown reboot poweroff halt kexec", rulePower, "%s would shut down or restart the machine; never stop the machine — finish the task instead")
	deny("mkfs mke2fs mkswap mkdosfs mkntfs mkexfatfs fdisk sfdisk cfdisk gdisk sgdisk parted gparted wipefs blkdiscard "+
		"hdparm badblocks tune2fs resize2fs e2fsck fsck debugfs lvremove vgremove pvremove lvcreate mdadm cryptsetup "+
		"zpool zfs btrfs losetup dmsetup nvme sg_format", ruleDisk, "%s would change disks, partitions or file systems, which can destroy all their data; do not touch disks")
	reg("mount", program{decision: Deny, rule: ruleMount, reason: "mount changes what is mounted on the machine; work with the files already in the workspace", check: func(w *walker, c *call) {
		// mount alone, or with only -l and -t TYPE, lists what is mounted.
		p := parseArgs(c.args(), spec("tOoLU", "--types", "--test-opts", "--options", "--label", "--uuid"))
		if len(p.ops) == 0 && !p.has("-a", "--all", "-o", "--options", "-L", "--label", "-U", "--uuid", "--bind", "--rbind", "--move", "-B", "-R", "-M", "--make-shared", "--make-private") {
			w.add(Allow, ruleInfo, "mount without a device or directory lists what is mounted", c.part)
			return
		}
		w.add(Deny, ruleMount, "mount changes what is mounted on the machine; work with the files already in the workspace", c.part)
	}})
	deny("umount swapon swapoff", ruleMount, "%s changes what is mounted on the machine; work with the files already in the workspace")
	deny("useradd userdel usermod adduser deluser groupadd groupdel groupmod passwd chpasswd chage chsh chfn gpasswd "+
		"visudo vipw vigr pwconv", ruleUserAdmin, "%s changes users, groups or passwords; account changes are not allowed")
	deny("insmod rmmod modprobe depmod setenforce auditctl aa-disable aa-complain grub-install update-grub efibootmgr "+
		"setcap capsh chroot nsenter pivot_root switch_root", ruleSystemConfig, "%s changes the kernel, boot or security configuration of the machine, or escapes confinement; this is not allowed")
	deny("iptables ip6tables iptables-restore nft firewall-cmd pfctl ebtables", ruleFirewall, "%s changes the firewall; network security settings are not the task's to change")
	reg("sysctl", program{decision: Allow, rule: ruleInfo, reason: "sysctl prints kernel settings", args: spec("r", "--pattern").optional("p", "--load").withFlags("--write", "--system", "--all"), check: func(w *walker, c *call) {
		p := c.opts()
		write := p.has("-w", "--write", "-p", "--load", "--system")
		for _, a := range p.ops {
			write = write || strings.Contains(a.s, "=")
		}
		if write {
			w.add(Deny, ruleSystemConfig, "sysctl -w changes kernel settings; this is not allowed", c.part)
		}
	}})
	reg("ufw", program{decision: Deny, rule: ruleFirewall, reason: "ufw changes the firewall", check: func(w *walker, c *call) {
		if a := c.args(); len(a) == 1 && (a[0].s == "status" || a[0].s == "version") {
			w.add(Allow, ruleInfo, "ufw status only shows the firewall", c.part)
			return
		}
		w.add(Deny, ruleFirewall, "ufw changes the firewall; network security settings are not the task's to change", c.part)
	}})
	reg("init telinit", program{decision: Confirm, rule: rulePower, reason: "%s changes the machine's run level", check: func(w *walker, c *call) {
		for _, a := range c.args() {
			switch a.s {
			case "0", "6", "1", "s", "S", "single", "emergency":
				w.add(Deny, rulePower, c.name+" "+a.s+" would halt, restart or take down the machine; never stop the machine", c.part)
			}
		}
	}})
	reg("printenv", program{decision: Allow, rule: ruleInfo, reason: "printenv prints the environment", exempt: true, check: func(w *walker, c *call) {
		if len(parseArgs(c.args(), spec("")).ops) == 0 {
			w.envDump("printenv", c.part)
		}
		for _, a := range c.args() {
			if secretVarName(a.s) && !w.e.placeholders[a.s] {
				w.add(Confirm, ruleSecretVar, fmt.Sprintf("printenv %s prints what looks like a credential into the transcript; use it without printing it", a.s), c.part)
			}
		}
	}})
	reg("diskutil", program{decision: Deny, rule: ruleDisk, reason: "diskutil changes disks", check: func(w *walker, c *call) {
		if a := c.args(); len(a) > 0 {
			switch a[0].s {
			case "list", "info", "activity", "listFilesystems", "apfs":
				if a[0].s != "apfs" || len(a) > 1 && a[1].s == "list" {
					w.add(Allow, ruleInfo, "diskutil "+a[0].s+" only shows disks", c.part)
					return
				}
			}
		}
		w.add(Deny, ruleDisk, "diskutil would change disks, partitions or volumes, which can destroy all their data; do not touch disks", c.part)
	}})
	reg("zmodload", program{decision: Allow, rule: ruleShellBuiltin, reason: "zmodload loads a zsh module", exempt: true, check: func(w *walker, c *call) {
		for _, a := range c.args() {
			if strings.HasPrefix(a.s, "zsh/net/") {
				w.add(Deny, ruleReverseShell, "zmodload "+a.s+" loads zsh's raw network sockets, the way zsh reverse shells are built; use curl for HTTP", c.part)
			}
		}
	}})
	reg("fuser", program{decision: Allow, rule: ruleInfo, reason: "fuser shows which processes use a file or port", exempt: true,
		args: spec("n", "--namespace").withFlags("--kill", "--interactive", "--mount", "--silent", "--user", "--verbose"), check: func(w *walker, c *call) {
			if c.opts().has("-k", "--kill") {
				w.add(Confirm, ruleKill, "fuser -k kills the processes that use a file or port; approval is needed", c.part)
			}
		}})
	reg("kill", program{decision: Confirm, rule: ruleKill, reason: "kill", check: checkKill, exempt: true, args: killArgs})
	reg("pkill killall killall5 skill slay pkill5 xkill", program{decision: Confirm, rule: ruleKill, reason: "kill", check: checkPkill, exempt: true, args: pkillArgs})
	reg("systemctl", program{decision: Confirm, rule: ruleService, reason: "systemctl manages services; approval is needed", check: checkSystemctl})
	reg("service rc-service sv", program{decision: Confirm, rule: ruleService, reason: "%s starts, stops or changes a service; approval is needed", check: func(w *walker, c *call) {
		for _, a := range c.args() {
			if a.s == "status" || a.s == "--status-all" {
				w.add(Allow, ruleInfo, c.name+" "+a.s+" only shows services", c.part)
				return
			}
		}
	}})
	reg("launchctl", program{decision: Confirm, rule: rulePersistence, reason: "launchctl manages services that run outside this session; approval is needed", check: func(w *walker, c *call) {
		if a := c.args(); len(a) > 0 {
			switch a[0].s {
			case "list", "print", "print-disabled", "blame", "version", "help", "managerpid", "getenv":
				w.add(Allow, ruleInfo, "launchctl "+a[0].s+" only shows services", c.part)
				return
			case "reboot", "halt":
				w.add(Deny, rulePower, "launchctl reboot would restart the machine; never stop the machine", c.part)
				return
			case "load", "bootstrap", "enable", "submit":
				w.add(Deny, rulePersistence, "launchctl "+a[0].s+" installs a job that starts on its own at every login, which is how persistence is installed; run what you need now, in this session", c.part)
				return
			}
		}
		w.add(Confirm, rulePersistence, "launchctl loads or changes services that run outside this session; approval is needed", c.part)
	}})
	reg("crontab", program{decision: Confirm, rule: rulePersistence, reason: "crontab manages jobs that run later; approval is needed", check: checkCrontab})
	reg("at batch", program{decision: Confirm, rule: ruleDeferred, reason: "%s runs commands later, outside this session; approval is needed", check: checkAt})
	reg("atq atrm", program{decision: Allow, rule: ruleInfo, reason: "%s lists or removes scheduled jobs"})
	reg("systemd-run", program{decision: Confirm, rule: rulePersistence, reason: "systemd-run runs a command as a service; approval is needed", check: func(w *walker, c *call) {
		w.add(Confirm, rulePersistence, "systemd-run runs a command as a service outside this session; run it directly instead", c.part)
		p := parseArgs(c.args(), spec("pMHuESt", "--property", "--machine", "--host", "--unit", "--setenv", "--slice", "--description", "--on-calendar", "--on-active", "--uid", "--gid", "--working-directory").firstOperand())
		if len(p.ops) > 0 {
			w.command(c.sub(p.ops))
		}
	}})
	reg("history", program{decision: Allow, rule: ruleShellBuiltin, reason: "history lists the shell history", exempt: true, args: spec("d"), check: func(w *walker, c *call) {
		for _, o := range c.opts().opts {
			switch o.name {
			case "-c", "-d", "-w":
				w.add(Deny, ruleHistoryWipe, "history "+o.name+" clears or rewrites the shell history, which hides what was run; leave the history alone", c.part)
				return
			}
		}
	}})
	reg("enable", program{args: spec("f"), decision: Allow, rule: ruleShellBuiltin, reason: "enable turns shell builtins on or off", exempt: true, check: func(w *walker, c *call) {
		if c.opts().has("-f") {
			w.add(Confirm, ruleEnvInjection, "enable -f loads a builtin from a shared library, which runs native code; approval is needed", c.part)
		}
	}})
	reg("locate mlocate plocate slocate", program{decision: Allow, rule: ruleReadOnly, reason: "%s lists file names from its database", check: func(w *walker, c *call) {
		for _, a := range parseArgs(c.args(), spec("dlnr", "--database", "--limit", "--regexp")).ops {
			if credentialName.MatchString(a.s) {
				w.add(Deny, ruleCredentialSearch, fmt.Sprintf("%s looks for credential files (%s) across the machine; do not harvest secrets — ask the user if the task needs one", c.name, a.show()), c.part)
			}
		}
	}})
	reg("grep egrep fgrep rg ag ack ugrep git-grep", program{decision: Allow, rule: ruleReadOnly, reason: "%s searches files and prints matches", check: checkGrep, args: grepArgs})
	reg("hostname", program{decision: Allow, rule: ruleInfo, reason: "hostname prints the machine's name", exempt: true, check: func(w *walker, c *call) {
		p := parseArgs(c.args(), spec("F", "--file"))
		if len(p.ops) > 0 || len(p.values("-F", "--file")) > 0 {
			w.add(Deny, ruleSystemConfig, "hostname NAME renames the machine; system settings are not the task's to change", c.part)
		}
	}})
	reg("ip", program{decision: Allow, rule: ruleInfo, reason: "ip shows the network configuration", exempt: true, check: func(w *walker, c *call) {
		for _, a := range c.args() {
			switch a.s {
			case "add", "del", "delete", "set", "flush", "change", "replace", "append", "prepend":
				w.add(Deny, ruleSystemConfig, "ip "+a.s+" changes the machine's network configuration; this is not allowed", c.part)
				return
			}
		}
	}})
	reg("security", program{decision: Confirm, rule: ruleKeychain, reason: "security manages the keychain; approval is needed", check: func(w *walker, c *call) {
		if a := c.args(); len(a) > 0 {
			switch a[0].s {
			case "find-generic-password", "find-internet-password", "dump-keychain", "export", "find-certificate", "unlock-keychain", "dump-trust-settings", "find-identity", "authorizationdb", "delete-keychain", "delete-generic-password", "delete-internet-password":
				w.add(Deny, ruleKeychain, "security "+a[0].s+" reads or changes the keychain's secrets; credentials must not be read — ask the user if the task needs them", c.part)
				return
			}
		}
		w.add(Confirm, ruleKeychain, "security manages the keychain; approval is needed", c.part)
	}})
	deny("secret-tool kwallet-query keyctl", ruleKeychain, "%s reads secrets from the keyring; credentials must not be read — ask the user if the task needs them")
	reg("pass gopass op bw lpass vault doppler infisical chamber sops age", program{decision: Confirm, rule: ruleKeychain, reason: "%s manages secrets; approval is needed", check: checkSecretTool})
	// gpg takes its commands as options, and any unique abbreviation of one
	// (--export-sec is --export-secret-keys).
	reg("gpg gpg2", program{decision: Allow, rule: ruleCrypto, reason: "gpg works on signatures and encrypted files",
		args: spec("orRuf", "--output", "--recipient", "--local-user", "--keyring", "--secret-keyring", "--homedir",
			"--default-key", "--passphrase", "--passphrase-file", "--keyserver").withFlags("--export-secret-keys",
			"--export-secret-subkeys", "--export-ownertrust", "--export", "--delete-secret-keys", "--delete-secret-and-public-key",
			"--delete-keys", "--import", "--recv-keys", "--send-keys", "--gen-key", "--full-generate-key", "--generate-key",
			"--quick-generate-key", "--list-keys", "--list-secret-keys", "--verify", "--decrypt", "--encrypt", "--sign",
			"--armor", "--batch", "--yes", "--detach-sign", "--clearsign", "--symmetric", "--fingerprint", "--edit-key"),
		check: func(w *walker, c *call) {
			for _, o := range c.opts().opts {
				switch o.name {
				case "--export-secret-keys", "--export-secret-subkeys", "--export-ownertrust":
					w.add(Deny, ruleSecretRead, "gpg "+o.name+" exports private keys; credentials must not be read or sent — ask the user", c.part)
					return
				case "--delete-secret-keys", "--delete-secret-and-public-key", "--delete-keys", "--import", "--recv-keys", "--send-keys", "--gen-key", "--full-generate-key", "--generate-key", "--quick-generate-key", "--edit-key":
					w.add(Confirm, ruleKeychain, "gpg "+o.name+" changes the user's keyring or talks to a key server; approval is needed", c.part)
					return
				}
			}
		}})
	reg("ssh-keygen", program{decision: Allow, rule: ruleCrypto, reason: "ssh-keygen works on keys", exempt: true, check: func(w *walker, c *call) {
		p := parseArgs(c.args(), spec("abCEfFGJjKMmNnOPrsSTtVwZzIhDRYlLkuUyeBQ", "-f"))
		if p.has("-R", "-F", "-l", "-L", "-y", "-B", "-Y", "-Q") {
			for _, f := range p.values("-f") {
				if p.has("-y") {
					w.pathOp(opRead, f, "ssh-keygen -y", false)
				}
			}
			return
		}
		out := p.values("-f")
		if len(out) == 0 {
			w.add(Confirm, ruleSshKey, "ssh-keygen creates a key pair in ~/.ssh; pass -f with a path in the workspace, or ask for approval", c.part)
			return
		}
		for _, f := range out {
			w.pathOp(opWrite, f, "ssh-keygen -f", false)
		}
	}})
	reg("ssh-add", program{decision: Confirm, rule: ruleSshKey, reason: "%s loads keys into the SSH agent; approval is needed", exempt: true})
	reg("ssh-agent", program{decision: Confirm, rule: ruleSshKey, reason: "%s starts an SSH agent that holds keys; approval is needed", exempt: true, check: func(w *walker, c *call) {
		// ssh-agent CMD runs CMD with the agent.
		if inner := w.unwrap("ssh-agent", c.argv); len(inner) > 0 {
			w.command(c.sub(inner))
		}
	}})
	reg("open xdg-open gio gnome-open kde-open sensible-browser x-www-browser www-browser firefox chromium chromium-browser google-chrome start explorer.exe", program{decision: Confirm, rule: ruleOpen, reason: "%s opens a file, URL or program outside the terminal; approval is needed", exempt: true})
	reg("osascript", program{decision: Confirm, rule: ruleInlineCode, reason: "osascript runs AppleScript, which can control other applications; approval is needed", check: checkInterpreter, args: inlineFlags["osascript"].args})
	// AI agents: another agent's actions are invisible to this policy.
	reg("claude gemini codex aider cursor-agent opencode amp goose qwen crush cline plandex gptme interpreter llm sgpt q kiro", program{decision: Confirm, rule: ruleAgent, reason: "%s starts another AI agent, whose actions this policy does not see; approval is needed", check: checkAgent, args: agentArgs})
}

var minerNames = []string{"xmrig", "xmr-stak", "cpuminer", "minerd", "ethminer", "nbminer", "t-rex",
	"lolminer", "phoenixminer", "cgminer", "bfgminer", "nanominer", "teamredminer", "gminer", "srbminer",
	"nheqminer", "ccminer", "claymore", "bminer", "miniz", "wildrig", "xmr-node-proxy"}

// isMiner reports whether a program's name is a cryptocurrency miner's.
func isMiner(name string) bool {
	l := strings.ToLower(name)
	for _, m := range minerNames {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// kill reads one option at most — a signal (-9, -KILL, -s KILL, -n 9) or a
// listing (-l, -L) — and then the processes, which may be negative (-1: every
// process the user can signal).
var (
	killArgs  = spec("", "-s", "-n").withFlags("--list", "--table").wholeWords().atMost(1)
	pkillArgs = spec("uUgGPsteFcnoO", "--euid", "--uid", "--group", "--pgroup", "--parent", "--session", "--terminal",
		"--signal", "--pidfile", "--ns", "--nslist", "--older", "--younger", "--user").withFlags("--list", "--table")
)

func checkKill(w *walker, c *call) {
	p := c.opts()
	if p.has("-l", "-L", "--list", "--table") {
		w.add(Allow, ruleInfo, "kill -l lists signals", c.part)
		return
	}
	for _, a := range p.ops {
		switch a.s {
		case "-1", "1":
			w.add(Deny, ruleKillAll, fmt.Sprintf("kill of %s would kill init or every process the user can signal, the session and the agent included; kill only the process you started, by its id", a.s), c.part)
			return
		}
	}
	if len(p.opts) > 0 && (p.opts[0].name == "-0" || p.opts[0].name == "-s" && p.opts[0].val.s == "0" || p.opts[0].name == "-n" && p.opts[0].val.s == "0") {
		w.add(Allow, ruleInfo, "kill -0 only checks that a process exists; it sends no signal", c.part)
		return
	}
	own := len(p.ops) > 0
	for _, a := range p.ops {
		own = own && ownJob(a)
	}
	if own {
		// $! and %N are the jobs this command's own shell started: a
		// shell's job table holds nothing else.
		w.add(Allow, ruleKill, "kill stops a background job this command started ($! or %N)", c.part)
		return
	}
	w.add(Confirm, ruleKill, "kill stops processes; approval is needed — kill only processes you started, by their id", c.part)
}

// ownJob reports whether a kill operand names a job of the shell itself: $!,
// the last background job's id, or a job spec (%1, %%).
func ownJob(a field) bool {
	r := strings.Trim(a.raw, `"`)
	switch {
	case r == "$!" || r == "${!}":
		return true
	case a.known() && len(a.s) > 1 && a.s[0] == '%':
		return strings.Trim(a.s[1:], "0123456789") == "" || a.s == "%%" || a.s == "%+" || a.s == "%-"
	}
	return false
}

func checkPkill(w *walker, c *call) {
	if c.name == "killall5" {
		w.add(Deny, ruleKillAll, "killall5 kills every process on the machine; kill only the process you started, by its id", c.part)
		return
	}
	p := c.opts()
	if a := c.args(); len(a) > 0 && (p.has("--list", "--table") || a[0].s == "-l" || a[0].s == "-L") {
		w.add(Allow, ruleInfo, c.name+" "+a[0].s+" lists the signal names", c.part)
		return
	}
	if len(p.values("-u", "-U", "--euid", "--uid", "--user", "-G", "--group", "-s", "--session", "-t", "--terminal", "-P", "--parent")) > 0 && c.name != "killall" ||
		c.name == "killall" && len(p.values("-u", "--user")) > 0 {
		w.add(Deny, ruleKillAll, c.name+" -u kills every process of a user (or session), the agent's own session included; kill only the process you started, by its id", c.part)
		return
	}
	for _, o := range p.ops {
		switch o.s {
		case ".", ".*", "", "^", "init", "systemd", "sshd", "dockerd", "containerd", "bash", "sh", "zsh", "login", "-1":
			w.add(Deny, ruleKillAll, fmt.Sprintf("%s %s would kill system processes or the shells everything runs in; kill only the process you started, by its id", c.name, o.show()), c.part)
			return
		}
	}
	w.add(Confirm, ruleKill, fmt.Sprintf("%s stops every process whose name matches; approval is needed — prefer kill with the id of a process you started", c.name), c.part)
}

func checkSystemctl(w *walker, c *call) {
	p := parseArgs(c.args(), spec("tpHMno", "--type", "--property", "--host", "--machine", "--lines", "--output", "--signal", "--state", "--root", "--kill-whom"))
	if len(p.ops) == 0 {
		w.add(Allow, ruleInfo, "systemctl lists services", c.part)
		return
	}
	switch verb := p.ops[0].s; verb {
	case "poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate", "emergency", "rescue", "default", "isolate", "soft-reboot", "exit", "switch-root":
		w.add(Deny, rulePower, "systemctl "+verb+" would stop, restart or change the state of the whole machine; never stop the machine", c.part)
	case "status", "list-units", "list-unit-files", "list-timers", "list-sockets", "list-jobs", "list-dependencies", "list-machines",
		"list-automounts", "list-paths", "is-active", "is-enabled", "is-failed", "is-system-running", "cat", "show", "help",
		"get-default", "show-environment":
		w.add(Allow, ruleInfo, "systemctl "+verb+" only shows services", c.part)
	case "enable", "link", "preset", "preset-all", "set-default", "add-wants", "add-requires", "reenable":
		w.add(Deny, rulePersistence, "systemctl "+verb+" makes a service start on its own at every boot or login, which is how persistence is installed; run what you need now, in this session", c.part)
	case "edit", "revert":
		w.add(Confirm, rulePersistence, "systemctl "+verb+" changes how a service starts; approval is needed", c.part)
	default:
		w.add(Confirm, ruleService, "systemctl "+verb+" starts, stops or changes services; approval is needed", c.part)
	}
}

func checkCrontab(w *walker, c *call) {
	p := parseArgs(c.args(), spec("uTs"))
	switch {
	case p.has("-l"):
		w.add(Allow, ruleInfo, "crontab -l lists scheduled jobs", c.part)
	case p.has("-r"):
		w.add(Deny, ruleCrontabRemove, "crontab -r deletes every scheduled job of the user, with no backup; edit the crontab instead, with approval", c.part)
	case p.has("-e"):
		w.add(Confirm, rulePersistence, "crontab -e changes jobs that run later, outside this session; approval is needed", c.part)
	default:
		w.add(Deny, rulePersistence, "crontab FILE replaces the user's whole crontab with jobs that run later, unwatched, which is how persistence is installed; run the commands now, in this session", c.part)
		text := ""
		if len(p.ops) == 0 || p.ops[0].s == "-" {
			if c.stdin.hasText {
				text = c.stdin.text
			} else if c.stdin.kind&(dDownload|dDecoded) != 0 {
				w.execData(c, c.stdin, "crontab", true)
			}
			text += "\n" + strings.Join(c.stdin.lits, "\n")
		}
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			n := 5
			if strings.HasPrefix(line, "@") {
				n = 1
			}
			if len(fields) > n {
				w.script(strings.Join(fields[n:], " "), c.part)
			}
		}
	}
}

func checkAt(w *walker, c *call) {
	p := parseArgs(c.args(), spec("qfmMt"))
	if p.has("-l", "-d", "-r", "-c") {
		w.add(Allow, ruleInfo, c.name+" lists or removes scheduled jobs", c.part)
		return
	}
	w.add(Confirm, ruleDeferred, c.name+" runs commands later, outside this session, where no one watches them; run them now instead", c.part)
	for _, f := range p.values("-f") {
		w.scriptFile(c, f, c.name+" -f")
	}
	if len(p.values("-f")) == 0 {
		w.execData(c, c.stdin, c.name, true)
	}
}

var credentialPattern = regexp.MustCompile(`(?i)AKIA|ASIA|PRIVATE KEY|BEGIN (RSA|OPENSSH|EC|DSA|PGP)|passw(or)?d|secret|token|api[_-]?key|ghp_|gho_|github_pat|xox[abpr]-|sk-[a-z0-9]|AIza|credential|bearer|aws_access|authorization`)

// checkGrep: searching the workspace is allowed; searching the whole home
// directory or filesystem needs approval, and hunting for credentials there is
// denied.
// grepArgs is how grep and its kin (rg, ag, ack) read their arguments.
var grepArgs = spec("efABCmdDgtTMj", "--regexp", "--file", "--after-context", "--before-context", "--context",
	"--max-count", "--include", "--exclude", "--exclude-dir", "--glob", "--type", "--type-not", "--max-depth", "--label",
	"--binary-files", "--devices", "--directories", "--replace", "--pre", "--pre-glob", "--ignore-file",
	"--max-filesize", "--threads", "--sort", "--sortr", "--field-match-separator", "--path-separator", "--engine").
	optional("", "--color", "--colour").withFlags("--recursive", "--dereference-recursive", "--files-with-matches",
	"--files-without-match", "--files", "--count", "--quiet", "--silent", "--ignore-case", "--line-number")

func checkGrep(w *walker, c *call) {
	p := c.opts()
	for _, v := range p.values("--pre") {
		w.add(Confirm, ruleProgramOption, c.name+" --pre runs a program on every file it searches; drop the option", c.part)
		w.programString(v, c.part, c.name+" --pre")
	}
	patterns := p.values("-e", "--regexp")
	ops := p.ops
	if len(patterns) == 0 && len(p.values("-f", "--file")) == 0 && len(ops) > 0 {
		patterns, ops = ops[:1], ops[1:]
	}
	recursive := c.name == "rg" || c.name == "ag" || c.name == "ack" || c.name == "ugrep" || p.has("-r", "-R", "--recursive", "--dereference-recursive")
	credential := false
	for _, pt := range patterns {
		if credentialPattern.MatchString(pt.s) {
			credential = true
		}
	}
	c.judgedPaths = true
	namesOnly := p.has("-l", "--files-with-matches", "-L", "--files-without-match", "-c", "--count", "-q", "--quiet")
	for _, f := range ops {
		if namesOnly && f.known() && projectSecretFile(w.canon(f.s)) && w.classifyPath(f).class == pcWorkspace {
			continue // only its name or a count is printed
		}
		if d := w.pathOp(opRead, f, actor(c), false); d == Deny {
			continue
		}
		if !recursive {
			continue
		}
		info := w.classifyPath(f)
		switch info.class {
		case pcHome, pcRoot, pcSystem, pcSSH:
			if credential {
				w.add(Deny, ruleCredentialSearch, fmt.Sprintf("%s searches %s for credentials; do not harvest secrets — ask the user if the task needs one", c.name, info.what), c.part)
			} else if info.class != pcSystem {
				w.add(Confirm, ruleSearchHome, fmt.Sprintf("%s searches all of %s, which holds private files; search the workspace instead, or ask for approval", c.name, info.what), c.part)
			}
		}
	}
}

func checkSecretTool(w *walker, c *call) {
	args := fieldStrings(c.args())
	read := false
	for _, a := range args {
		switch a {
		case "show", "get", "read", "inject", "export", "item", "cat", "decrypt", "-d", "--decrypt", "run", "secrets", "kv", "unseal", "login", "token":
			read = true
		}
	}
	if c.name == "pass" || c.name == "gopass" {
		if len(args) == 0 || args[0] != "ls" && args[0] != "list" && args[0] != "find" && args[0] != "grep" && args[0] != "init" && args[0] != "version" && args[0] != "help" {
			read = true
		}
	}
	if read {
		w.add(Deny, ruleSecretRead, fmt.Sprintf("%s %s reads secrets from a password manager or vault; credentials must not be read — ask the user if the task needs them", c.name, strings.Join(args[:min(2, len(args))], " ")), c.part)
		return
	}
	w.add(Confirm, ruleKeychain, c.name+" manages secrets; approval is needed", c.part)
}

// yoloFlag matches the options that make an AI agent approve its own
// actions; yoloMode the values of the options that choose how it asks.
var (
	yoloFlag  = regexp.MustCompile(`^(--dangerously-skip-permissions|--dangerously-bypass-approvals-and-sandbox|--dangerously-allow-all|--yolo|-y|--yes|--yes-always|--force|-f|--full-auto|--auto-approve|--trust-all-tools|--allow-all-tools|--no-confirm|--bypass-permissions)$`)
	yoloMode  = set("bypasspermissions", "yolo", "never", "danger-full-access")
	agentArgs = spec("asm", "--permission-mode", "--approval-mode", "--ask-for-approval", "--sandbox", "--model",
		"--allowedTools", "--allowed-tools", "--disallowedTools", "--output-format", "--input-format", "--mcp-config",
		"--append-system-prompt", "--resume", "--cwd", "--prompt").withFlags("--print", "--continue", "--verbose",
		"--dangerously-skip-permissions", "--dangerously-bypass-approvals-and-sandbox", "--full-auto", "--yolo")
)

func checkAgent(w *walker, c *call) {
	for _, o := range c.opts().opts {
		yolo := false
		switch o.name {
		case "--permission-mode", "--approval-mode", "-a", "--ask-for-approval", "-s", "--sandbox":
			yolo = yoloMode[strings.ToLower(o.val.s)]
		default:
			yolo = yoloFlag.MatchString(o.name) && !(o.name == "-y" && c.name == "llm") && !(o.name == "-f" && c.name != "cursor-agent")
		}
		if yolo {
			w.add(Deny, ruleYoloAgent, fmt.Sprintf("%s %s would start another AI agent that approves its own actions, out of this policy's sight; do the work here, step by step", c.name, o.name), c.part)
			return
		}
	}
	w.add(Confirm, ruleAgent, c.name+" starts another AI agent, whose actions this policy does not see; approval is needed", c.part)
}
