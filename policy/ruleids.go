package policy

import "strings"

// The policy's own rules, each with an id that verdicts name ("default:" and
// the id) and a line that says what it covers. This table is the one place
// rule ids are declared: checks name a rule by its constant, corral check
// --explain prints the lines of the rules that decided, and the list in
// docs/policy.md is checked against it (TestRuleTableInDocs).
//
// A rule about what a command does to a path is named by the two tables
// below it: the action (read, write, delete ...) and the kind of path (home,
// workspace, agent-config ...), as in write-agent-config or delete-tree-home.

// ruleID names a built-in rule: an index into ruleTable, or a path rule
// (pathRuleBase and above).
type ruleID uint16

const (
	ruleNone ruleID = iota
	ruleAgent
	ruleAlias
	ruleArchiveAbsolute
	ruleArchiveExec
	ruleArithmeticSubst
	ruleAwkDynamic
	ruleAwkExec
	ruleBuild
	ruleBuildFileChanged
	ruleBuildProgram
	ruleChattr
	ruleChown
	ruleCloud
	ruleCloudDestroy
	ruleCluster
	ruleClusterDestroy
	ruleCredentialSearch
	ruleCrontabRemove
	ruleCrypto
	ruleDatabase
	ruleDataLoss
	ruleDbWipe
	ruleDebugAttach
	ruleDecodedCode
	ruleDecodedCommand
	ruleDeferred
	ruleDeploy
	ruleDisk
	ruleDiskFill
	ruleDocker
	ruleDockerHostMount
	ruleDockerPrivileged
	ruleDockerRead
	ruleDockerRemote
	ruleDownload
	ruleDownloadExec
	ruleDynamicCommand
	ruleDynamicScript
	ruleEditor
	ruleEditorExec
	ruleEditorScript
	ruleEmpty
	ruleEnvDump
	ruleEnvInjection
	ruleEval
	ruleEvalDynamic
	ruleExecData
	ruleExfil
	ruleFindDelete
	ruleFindExec
	ruleFindExecDelete
	ruleFirewall
	ruleForge
	ruleForkBomb
	ruleGit
	ruleGitAlias
	ruleGitConfig
	ruleGitConfigProgram
	ruleGitDiscard
	ruleGitResolve
	ruleGitHistoryRewrite
	ruleGitNetwork
	ruleGitOutside
	ruleGitProgramOption
	ruleGitPush
	ruleGitRemote
	ruleGitUnknown
	ruleGui
	ruleHash
	ruleHistoryExec
	ruleHistoryWipe
	ruleIndirectExpansion
	ruleInfo
	ruleInfrastructure
	ruleInfrastructureDestroy
	ruleInfrastructureLocal
	ruleInlineCode
	ruleInstall
	ruleInternalError
	ruleInterpreter
	ruleKeychain
	ruleKill
	ruleKillAll
	ruleListen
	ruleLocalHttp
	ruleMessage
	ruleMiner
	ruleMount
	ruleNamespaces
	ruleNetwork
	ruleNetworkCapture
	ruleNetworkScan
	ruleNpx
	ruleNpxDownload
	ruleNpxLocal
	ruleOpen
	ruleOutsideScript
	rulePackageCache
	rulePackageConfig
	rulePackageInstall
	rulePackageScript
	ruleParseError
	rulePathProgram
	rulePersistence
	rulePipedScript
	rulePower
	rulePrivilege
	ruleProcessFlood
	ruleProgramOption
	rulePromptExpansion
	rulePublish
	ruleReadDotenv
	ruleReadOnly
	ruleRemoteCode
	ruleReverseShell
	ruleRmNoPreserveRoot
	ruleRunScript
	ruleSandboxEscape
	ruleSearchHome
	ruleSecretExfil
	ruleSecretRead
	ruleSecretVar
	ruleSedDynamic
	ruleSedExec
	ruleServer
	ruleService
	ruleSetuid
	ruleShell
	ruleShellBuiltin
	ruleShellFunction
	ruleShellString
	ruleShred
	ruleSource
	ruleSsh
	ruleSshKey
	ruleSshProgram
	ruleSshReverseTunnel
	ruleSshTunnel
	ruleSystemConfig
	ruleTerminal
	ruleText
	ruleTooComplex
	ruleTooDeep
	ruleTooLong
	ruleTooManyArgs
	ruleTrap
	ruleTrapDynamic
	ruleTunnel
	ruleUnknownProgram
	ruleUpload
	ruleUserAdmin
	ruleWorkspaceChange
	ruleWrapper
	ruleXargsDelete
	ruleYoloAgent
	ruleCount // the number of plain rules, plus one
)

// ruleTable holds each plain rule's id and what it covers.
var ruleTable = [ruleCount]struct{ id, covers string }{
	ruleAgent:                 {"agent", "starting another AI agent, whose actions this policy does not see"},
	ruleAlias:                 {"alias", "an alias defined in the command: the command it expands to is checked"},
	ruleArchiveAbsolute:       {"archive-absolute", "extracting an archive's members to absolute paths"},
	ruleArchiveExec:           {"archive-exec", "an archiver option that runs a program (tar --to-command, zip -TT)"},
	ruleArithmeticSubst:       {"arithmetic-subst", "bash evaluating a value as arithmetic, which runs command substitutions hidden in array subscripts"},
	ruleAwkDynamic:            {"awk-dynamic", "an awk program computed at run time"},
	ruleAwkExec:               {"awk-exec", "an awk program that runs commands or loads extensions"},
	ruleBuild:                 {"build", "building, checking or testing the project"},
	ruleBuildFileChanged:      {"build-file-changed", "a build tool run after the command changed its build file in a way the policy cannot follow"},
	ruleBuildProgram:          {"build-program", "a build option that runs a program of the command's choosing (go -exec, -toolexec)"},
	ruleChattr:                {"chattr", "changing file attributes such as immutability"},
	ruleChown:                 {"chown", "changing who owns files"},
	ruleCloud:                 {"cloud", "a cloud provider's CLI, with the user's credentials"},
	ruleCloudDestroy:          {"cloud-destroy", "deleting cloud resources"},
	ruleCluster:               {"cluster", "a cluster's CLI (kubectl, helm), with the user's credentials"},
	ruleClusterDestroy:        {"cluster-destroy", "deleting namespaces, nodes or everything in a cluster"},
	ruleCredentialSearch:      {"credential-search", "searching the machine for credential files"},
	ruleCrontabRemove:         {"crontab-remove", "deleting every scheduled job of the user"},
	ruleCrypto:                {"crypto", "working with keys, certificates and signatures locally"},
	ruleDatabase:              {"database", "connecting to a database server"},
	ruleDataLoss:              {"data-loss", "an ORM, migration tool or framework dropping, wiping or resetting a database"},
	ruleDbWipe:                {"db-wipe", "dropping databases or their users"},
	ruleDebugAttach:           {"debug-attach", "attaching a debugger or tracer to a running process"},
	ruleDecodedCode:           {"decoded-code", "running code that is decoded (base64, hex) at run time"},
	ruleDecodedCommand:        {"decoded-command", "a program name that comes from decoded or downloaded data"},
	ruleDeferred:              {"deferred", "running commands later, outside the session (at, batch)"},
	ruleDeploy:                {"deploy", "a build target or package script that by convention deploys or releases"},
	ruleDisk:                  {"disk", "changing disks, partitions or file systems"},
	ruleDiskFill:              {"disk-fill", "making a file larger than max_file_size, or writing an endless stream into one"},
	ruleDocker:                {"docker", "managing containers"},
	ruleDockerHostMount:       {"docker-host-mount", "a container that mounts the engine's socket or the host's root"},
	ruleDockerPrivileged:      {"docker-privileged", "a privileged container, or one with the host's namespaces"},
	ruleDockerRead:            {"docker-read", "listing or showing through the container engine, which controls the machine"},
	ruleDockerRemote:          {"docker-remote", "talking to another container engine"},
	ruleDownload:              {"download", "fetching data from the network"},
	ruleDownloadExec:          {"download-exec", "running a file downloaded earlier in the command, unread"},
	ruleDynamicCommand:        {"dynamic-command", "a program whose name is computed at run time"},
	ruleDynamicScript:         {"dynamic-script", "running a script whose path is computed at run time"},
	ruleEditor:                {"editor", "an editor"},
	ruleEditorExec:            {"editor-exec", "an editor option that runs commands (vim -c '!cmd')"},
	ruleEditorScript:          {"editor-script", "an editor running a script of commands"},
	ruleEmpty:                 {"empty", "a command that runs nothing"},
	ruleEnvDump:               {"env-dump", "printing every environment variable into the transcript"},
	ruleEnvInjection:          {"env-injection", "loading code into programs through the environment or a shared library"},
	ruleEval:                  {"eval", "eval: the command it runs is checked"},
	ruleEvalDynamic:           {"eval-dynamic", "eval of a command computed at run time"},
	ruleExecData:              {"exec-data", "running data that flows in (a pipe, a here-document, a substitution) as code"},
	ruleExfil:                 {"exfil", "sending the environment, credentials or the project's secrets over the network"},
	ruleFindDelete:            {"find-delete", "find -delete"},
	ruleFindExec:              {"find-exec", "find -exec: the command it runs is checked"},
	ruleFindExecDelete:        {"find-exec-delete", "find -exec with a program that deletes or destroys the matches"},
	ruleFirewall:              {"firewall", "changing the firewall"},
	ruleForge:                 {"forge", "the code host's CLI (gh, glab), with the user's credentials"},
	ruleForkBomb:              {"fork-bomb", "a function or code that starts copies of itself without end"},
	ruleGit:                   {"git", "git on the local repository"},
	ruleGitAlias:              {"git-alias", "a git alias: the git command it runs is checked"},
	ruleGitConfig:             {"git-config", "changing the user's or machine's git settings, or editing them in an editor"},
	ruleGitConfigProgram:      {"git-config-program", "git configuration that names a program git runs, or loads settings of the command's choosing"},
	ruleGitDiscard:            {"git-discard", "git discarding uncommitted work, branches, stashes or a working tree"},
	ruleGitResolve:            {"git-resolve", "git checkout --ours or --theirs, taking one side of a merge conflict"},
	ruleGitHistoryRewrite:     {"git-history-rewrite", "git rewriting history or deleting what recovers lost work"},
	ruleGitOutside:            {"git-outside", "git changing a repository or working tree outside the workspace"},
	ruleGitNetwork:            {"git-network", "git talking to another machine"},
	ruleGitProgramOption:      {"git-program-option", "a git option or subcommand that runs a program or hooks"},
	ruleGitPush:               {"git-push", "git push"},
	ruleGitRemote:             {"git-remote", "changing where git pushes and fetches"},
	ruleGitUnknown:            {"git-unknown", "a git subcommand the policy does not know (it may be an alias that runs a program)"},
	ruleGui:                   {"gui", "a program that opens a window outside the terminal"},
	ruleHash:                  {"hash", "a name bound to a program by hash -p: that program is checked"},
	ruleHistoryExec:           {"history-exec", "running commands again from the shell's history"},
	ruleHistoryWipe:           {"history-wipe", "clearing the shell history or stopping it from being saved"},
	ruleIndirectExpansion:     {"indirect-expansion", "${!var}: reading a variable named by another"},
	ruleInfo:                  {"info", "printing information about the system"},
	ruleInfrastructure:        {"infrastructure", "infrastructure tools (terraform, pulumi) with the user's credentials"},
	ruleInfrastructureDestroy: {"infrastructure-destroy", "destroying infrastructure"},
	ruleInfrastructureLocal:   {"infrastructure-local", "infrastructure tools working on local files only"},
	ruleInlineCode:            {"inline-code", "an interpreter running code given on the command line"},
	ruleInstall:               {"install", "installing into system directories"},
	ruleInternalError:         {"internal-error", "the policy failed while checking the command"},
	ruleInterpreter:           {"interpreter", "an interpreter running a program from a file"},
	ruleKeychain:              {"keychain", "managing the keychain, keyring or a password manager"},
	ruleKill:                  {"kill", "stopping processes"},
	ruleKillAll:               {"kill-all", "killing init, every process, or every process of a user"},
	ruleListen:                {"listen", "listening for connections from other machines"},
	ruleLocalHttp:             {"local-http", "requests to a server on this machine"},
	ruleMessage:               {"message", "writing to other users' terminals"},
	ruleMiner:                 {"miner", "cryptocurrency mining"},
	ruleMount:                 {"mount", "changing what is mounted"},
	ruleNamespaces:            {"namespaces", "running a command in other namespaces, under another root or with other privileges"},
	ruleNetwork:               {"network", "raw network connections, relays, mail, packets to other hosts"},
	ruleNetworkCapture:        {"network-capture", "capturing network traffic"},
	ruleNetworkScan:           {"network-scan", "scanning or attacking other machines"},
	ruleNpx:                   {"npx", "running a package's binary installed in the project"},
	ruleNpxDownload:           {"npx-download", "running a package that may be downloaded first (npx, uvx, create-*)"},
	ruleNpxLocal:              {"npx-local", "npx, bunx or pnpm exec running a tool the project may have in node_modules/.bin, or else fetching it"},
	ruleOpen:                  {"open", "opening a file, URL or program outside the terminal"},
	ruleOutsideScript:         {"outside-script", "running a script outside the workspace that the policy has not seen"},
	rulePackageCache:          {"package-cache", "deleting a package manager's cache"},
	rulePackageConfig:         {"package-config", "changing a package manager's settings (registries, script shell)"},
	rulePackageInstall:        {"package-install", "installing or changing packages from the network"},
	rulePackageScript:         {"package-script", "a script set into package.json: what it runs is checked"},
	ruleParseError:            {"parse-error", "a command that does not parse as bash"},
	rulePathProgram:           {"path-program", "a program at a path outside the system directories"},
	rulePersistence:           {"persistence", "installing what starts on its own later (services, login items, cron)"},
	rulePipedScript:           {"piped-script", "text written in the command fed to a shell: its commands are checked"},
	rulePower:                 {"power", "shutting down or restarting the machine"},
	rulePrivilege:             {"privilege", "running as root or another user, or changing the shell's group"},
	ruleProcessFlood:          {"process-flood", "starting background processes without end"},
	ruleProgramOption:         {"program-option", "an option that runs a program (grep --pre, less's LESSOPEN)"},
	rulePromptExpansion:       {"prompt-expansion", "${var@P}: expanding a value as a prompt, which runs commands in it"},
	rulePublish:               {"publish", "publishing the project to a registry or store"},
	ruleReadDotenv:            {"read-dotenv", "printing a project's environment file (.env) into the transcript"},
	ruleReadOnly:              {"read-only", "programs that only read files and print what they find"},
	ruleRemoteCode:            {"remote-code", "running code straight from the network"},
	ruleReverseShell:          {"reverse-shell", "connecting a shell to the network (a reverse or bind shell)"},
	ruleRmNoPreserveRoot:      {"rm-no-preserve-root", "rm --no-preserve-root"},
	ruleRunScript:             {"run-script", "running a script whose text the command wrote, or one in the workspace"},
	ruleSandboxEscape:         {"sandbox-escape", "running a command on the host, outside the sandbox"},
	ruleSearchHome:            {"search-home", "searching the whole home directory or filesystem"},
	ruleSecretExfil:           {"secret-exfil", "sending a credential variable over the network"},
	ruleSecretRead:            {"secret-read", "reading credentials (keys, tokens, password stores, the metadata service)"},
	ruleSecretVar:             {"secret-var", "printing a credential variable into the transcript"},
	ruleSedDynamic:            {"sed-dynamic", "a sed script computed at run time"},
	ruleSedExec:               {"sed-exec", "a sed script that runs shell commands (the e command or flag)"},
	ruleServer:                {"server", "starting a server that serves files over the network"},
	ruleService:               {"service", "starting, stopping or changing services"},
	ruleSetuid:                {"setuid", "setting the setuid or setgid bit"},
	ruleShell:                 {"shell", "a shell running a script"},
	ruleShellBuiltin:          {"shell-builtin", "a shell builtin that only changes the shell's own state"},
	ruleShellFunction:         {"shell-function", "a function defined in the command: its body is checked"},
	ruleShellString:           {"shell-string", "sh -c STRING: the string's commands are checked"},
	ruleShred:                 {"shred", "destroying a file beyond recovery"},
	ruleSource:                {"source", "running a script in the current shell"},
	ruleSsh:                   {"ssh", "connecting to another machine over SSH, or copying files to one"},
	ruleSshKey:                {"ssh-key", "creating or loading SSH keys"},
	ruleSshProgram:            {"ssh-program", "an SSH option that runs a program on this machine (ProxyCommand, LocalCommand)"},
	ruleSshReverseTunnel:      {"ssh-reverse-tunnel", "a tunnel from another machine back into this one"},
	ruleSshTunnel:             {"ssh-tunnel", "an SSH tunnel"},
	ruleSystemConfig:          {"system-config", "changing the kernel, boot, network or security configuration of the machine"},
	ruleTerminal:              {"terminal", "terminal sessions and windows that outlive the command"},
	ruleText:                  {"text", "processing text and printing the result"},
	ruleTooComplex:            {"too-complex", "a command past the policy's limits: more commands than it checks"},
	ruleTooDeep:               {"too-deep", "commands nested in strings or wrappers deeper than the policy checks"},
	ruleTooLong:               {"too-long", "a command or script string longer than the policy checks"},
	ruleTooManyArgs:           {"too-many-args", "more arguments than the policy checks one by one"},
	ruleTrap:                  {"trap", "trap: the handler it sets is checked"},
	ruleTrapDynamic:           {"trap-dynamic", "a trap handler computed at run time"},
	ruleTunnel:                {"tunnel", "exposing the machine to the internet through a tunnel"},
	ruleUnknownProgram:        {"unknown-program", "a program the policy does not know (allowed, or confirmed with --strict)"},
	ruleUpload:                {"upload", "uploading files to another machine"},
	ruleUserAdmin:             {"user-admin", "changing users, groups or passwords"},
	ruleWorkspaceChange:       {"workspace-change", "programs that change files in the workspace"},
	ruleWrapper:               {"wrapper", "a program that runs another (sudo, env, timeout, xargs ...): the command it runs is checked"},
	ruleXargsDelete:           {"xargs-delete", "xargs with a program that deletes or destroys the files named on its input"},
	ruleYoloAgent:             {"yolo-agent", "starting another AI agent that approves its own actions"},
}

// Path rules: what a command does (pathVerbs) to which kind of path
// (pathNouns). Their ids are pathRuleBase + verb<<5 + noun.
const pathRuleBase ruleID = 1 << 10

type pathVerb uint8

const (
	verbRead pathVerb = iota
	verbWrite
	verbDelete
	verbDeleteTree
	verbChmod
	verbLink
	verbCount
)

var pathVerbs = [verbCount]struct{ id, covers string }{
	verbRead:       {"read", "reading or copying"},
	verbWrite:      {"write", "creating, writing to or editing"},
	verbDelete:     {"delete", "deleting"},
	verbDeleteTree: {"delete-tree", "deleting the whole tree of"},
	verbChmod:      {"chmod", "changing the mode or owner of"},
	verbLink:       {"link", "making a symbolic link to"},
}

type pathNoun uint8

const (
	nounWorkspace pathNoun = iota
	nounTmpFile
	nounOutsideWorkspace
	nounHomeDir
	nounAgentConfig
	nounDevice
	nounAboveWorkspace
	nounTmp
	nounHome
	nounSystem
	nounRoot
	nounKernel
	nounSecret
	nounSSHConfig
	nounStartupFile
	nounHistory
	nounDevTCP
	nounEmptyVariable
	nounComputedPath
	nounCount
)

var pathNouns = [nounCount]struct{ id, covers string }{
	nounWorkspace:        {"workspace", "a path in the workspace"},
	nounTmpFile:          {"tmp-file", "a path in /tmp"},
	nounOutsideWorkspace: {"outside-workspace", "a path outside the workspace (a sibling, a file in home, ~/.gitconfig)"},
	nounHomeDir:          {"home-dir", "a directory of the user's data in home (~/Documents)"},
	nounAgentConfig:      {"agent-config", "an AI agent's or editor's configuration (.claude/, .mcp.json, .vscode/tasks.json, .envrc ...)"},
	nounDevice:           {"device", "a device (a disk, /dev/null)"},
	nounAboveWorkspace:   {"above-workspace", "a directory that holds the workspace (..)"},
	nounTmp:              {"tmp", "/tmp (or everything in it)"},
	nounHome:             {"home", "the home directory (or everything in it)"},
	nounSystem:           {"system", "a system directory or a file in one"},
	nounRoot:             {"root", "the root directory (or everything in it)"},
	nounKernel:           {"kernel", "a kernel control file (/proc/sysrq-trigger, /sys)"},
	nounSecret:           {"secret", "credentials (keys, tokens, password files)"},
	nounSSHConfig:        {"ssh-config", "the SSH configuration (~/.ssh)"},
	nounStartupFile:      {"startup-file", "a shell startup file or a program started at login"},
	nounHistory:          {"history", "a shell or REPL history file"},
	nounDevTCP:           {"dev-tcp", "bash's /dev/tcp and /dev/udp"},
	nounEmptyVariable:    {"empty-variable", "\"$X/...\", the root directory when X is empty"},
	nounComputedPath:     {"computed-path", "a path computed at run time"},
}

// pathRuleID is the id of the rule about doing what verb says to a path
// that noun names.
func pathRuleID(v pathVerb, n pathNoun) ruleID {
	return pathRuleBase + ruleID(v)<<5 + ruleID(n)
}

// Path rules that checks also name where a path is not an argument: an
// agent's configuration changed through find -path .claude -exec, a history
// file read by a program's option.
const (
	ruleWriteAgentConfig = pathRuleBase + ruleID(verbWrite)<<5 + ruleID(nounAgentConfig)
	ruleReadHistory      = pathRuleBase + ruleID(verbRead)<<5 + ruleID(nounHistory)
)

// id returns a rule's id, without "default:".
func (r ruleID) id() string {
	if r >= pathRuleBase {
		v, n := pathVerb((r-pathRuleBase)>>5), pathNoun((r-pathRuleBase)&31)
		if v < verbCount && n < nounCount {
			return pathVerbs[v].id + "-" + pathNouns[n].id
		}
		return ""
	}
	if r < ruleCount {
		return ruleTable[r].id
	}
	return ""
}

// name returns how a verdict names a rule: "default:" and its id ("" for
// ruleNone).
func (r ruleID) name() string {
	if r > ruleNone && r < ruleCount {
		return ruleNames.plain[r]
	}
	if r >= pathRuleBase {
		v, n := pathVerb((r-pathRuleBase)>>5), pathNoun((r-pathRuleBase)&31)
		if v < verbCount && n < nounCount {
			return ruleNames.path[v][n]
		}
	}
	return ""
}

// ruleNames holds how verdicts name every rule, made once so that naming a
// rule in a verdict costs nothing.
var ruleNames = func() (names struct {
	plain [ruleCount]string
	path  [verbCount][nounCount]string
}) {
	for i := ruleNone + 1; i < ruleCount; i++ {
		names.plain[i] = "default:" + ruleTable[i].id
	}
	for v := range verbCount {
		for n := range nounCount {
			names.path[v][n] = "default:" + pathRuleID(v, n).id()
		}
	}
	return names
}()

// covers returns what a rule covers.
func (r ruleID) covers() string {
	if r >= pathRuleBase {
		v, n := pathVerb((r-pathRuleBase)>>5), pathNoun((r-pathRuleBase)&31)
		if v < verbCount && n < nounCount {
			return pathVerbs[v].covers + " " + pathNouns[n].covers
		}
		return ""
	}
	if r > ruleNone && r < ruleCount {
		return ruleTable[r].covers
	}
	return ""
}

// RuleInfo describes one of the policy's own rules.
type RuleInfo struct {
	// Name is how verdicts name the rule: "default:" and its id.
	Name string `json:"name"`
	// Covers says what the rule is about.
	Covers string `json:"covers"`
}

// DescribeRule says what the rule a verdict names covers: one of the
// policy's own rules ("default:git-push", "default:write-agent-config"). It
// reports false for a name that is not one of them (a user's rule).
func DescribeRule(name string) (RuleInfo, bool) {
	id, ok := strings.CutPrefix(name, "default:")
	if !ok {
		return RuleInfo{}, false
	}
	for r := ruleNone + 1; r < ruleCount; r++ {
		if ruleTable[r].id == id {
			return RuleInfo{Name: name, Covers: ruleTable[r].covers}, true
		}
	}
	for v := pathVerb(0); v < verbCount; v++ {
		rest, ok := strings.CutPrefix(id, pathVerbs[v].id+"-")
		if !ok {
			continue
		}
		for n := pathNoun(0); n < nounCount; n++ {
			if pathNouns[n].id == rest {
				r := pathRuleID(v, n)
				return RuleInfo{Name: name, Covers: r.covers()}, true
			}
		}
	}
	return RuleInfo{}, false
}

// String returns the rule's name, as verdicts write it.
func (r ruleID) String() string { return r.name() }
