package main

import (
	"fmt"
	"log/slog"

	"github.com/docker/go-units"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/sandbox/kube"
)

// backendFlags choose where sandboxes run: the Docker engine (the default)
// or a Kubernetes cluster.
type backendFlags struct {
	name       string
	kubeconfig string
	context    string
	namespace  string
	// sandbox pods only (run, mcp, shell)
	agentImage   string
	warmPool     string
	storage      string
	claim        string
	writableRoot bool
	noUpload     bool
	seedTar      string
	seedGit      string
	seedRev      string
}

// register adds the flags that name the backend (all of ps, gc, run, mcp,
// shell); with pods, those of the pods too.
func (f *backendFlags) register(fs *pflag.FlagSet, pods bool) {
	fs.StringVar(&f.name, "backend", "docker", "where sandboxes run: docker (the engine of DOCKER_HOST) or kubernetes (a pod each, in the cluster of --kubeconfig)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "with --backend kubernetes, the kubeconfig `FILE` (default: $KUBECONFIG, ~/.kube/config, or the pod's service account when corral runs in a cluster)")
	fs.StringVar(&f.context, "kube-context", "", "with --backend kubernetes, the kubeconfig's context (default: its current one)")
	fs.StringVar(&f.namespace, "namespace", "", "with --backend kubernetes, the namespace of the sandbox pods (default: the context's, else default)")
	if !pods {
		return
	}
	fs.StringVar(&f.agentImage, "agent-image", kube.DefaultAgentImage, "with --backend kubernetes, the image holding corral's static binary at /corral, which an init container copies into each pod (build it with corral image build --agent)")
	fs.StringVar(&f.warmPool, "warm-pool", "", "with --backend kubernetes, claim sandboxes from this agent-sandbox SandboxWarmPool instead of creating pods (needs agent-sandbox's CRDs in the cluster)")
	fs.StringVar(&f.storage, "ephemeral-storage", "4g", "with --backend kubernetes, the pod's disk (workspace, /tmp, writable layer), requested and limited")
	fs.StringVar(&f.claim, "workspace-claim", "", "with --backend kubernetes, a PersistentVolumeClaim to hold the workspace instead of an emptyDir (it outlives the pod)")
	fs.BoolVar(&f.writableRoot, "writable-root", false, "with --backend kubernetes, leave the image's root filesystem writable (read-only by default)")
	fs.BoolVar(&f.noUpload, "no-upload", false, "with --backend kubernetes, do not upload the workspace directory into the pod (it starts empty, or as --workspace-claim holds it)")
	fs.StringVar(&f.seedTar, "seed-tar", "", "with --backend kubernetes, seed the pod's workspace from this tar `FILE` (gzipped or not) instead of the workspace directory")
	fs.StringVar(&f.seedGit, "seed-git", "", "with --backend kubernetes, seed the pod's workspace with a clone of this git `REPO` (a URL or a directory, cloned on this host)")
	fs.StringVar(&f.seedRev, "seed-rev", "", "with --seed-git, the revision to check out (default HEAD)")
}

// kubernetes reports whether the flags choose the Kubernetes backend.
func (f *backendFlags) kubernetes() bool { return f.name == "kubernetes" || f.name == "k8s" }

// backend returns the backend the flags choose.
func (f *backendFlags) backend(log *slog.Logger) (sandbox.Backend, error) {
	switch {
	case f.name == "docker" || f.name == "":
		if f.kubeconfig != "" || f.namespace != "" || f.warmPool != "" || f.seedTar != "" || f.seedGit != "" {
			return nil, fmt.Errorf("--kubeconfig, --namespace, --warm-pool and --seed-* need --backend kubernetes")
		}
		return docker.Backend, nil
	case f.kubernetes():
	default:
		return nil, fmt.Errorf("--backend %q: want docker or kubernetes", f.name)
	}
	// client-go reports what it cannot hand back on the klog logger:
	// corral's own errors say it.
	klog.SetLogger(logr.Discard())
	opts := kube.Options{
		Kubeconfig:     f.kubeconfig,
		Context:        f.context,
		Namespace:      f.namespace,
		AgentImage:     f.agentImage,
		WarmPool:       f.warmPool,
		WorkspaceClaim: f.claim,
		WritableRoot:   f.writableRoot,
		NoUpload:       f.noUpload,
		Logger:         log,
	}
	if f.storage != "" {
		n, err := units.RAMInBytes(f.storage)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--ephemeral-storage %q: want a size such as 4g", f.storage)
		}
		opts.EphemeralStorage = n
	}
	switch {
	case f.seedTar != "" || f.seedGit != "":
		opts.Source = &kube.Source{Tar: f.seedTar, Git: f.seedGit, Rev: f.seedRev}
	case f.seedRev != "":
		return nil, fmt.Errorf("--seed-rev needs --seed-git")
	}
	b, err := kube.New(opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}
