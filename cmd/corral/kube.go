package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/kube"
)

func newKubeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kube pool create NAME | pool ls | pool rm NAME...",
		Short: "Manage the Kubernetes backend's warm pools",
		Long: `A warm pool keeps sandbox pods running, ahead of the sessions that claim them
with run, mcp, serve or shell --backend kubernetes --warm-pool NAME. It is
agent-sandbox's (sigs.k8s.io/agent-sandbox, whose CRDs and controller the
cluster must run): a SandboxTemplate whose pods are corral's sandbox pods —
the agent as their main process, hardened, denied the network by corral's
NetworkPolicy when their network is none — and a SandboxWarmPool of --size of
them, both named NAME. A session's claim takes one already running, and the
pool makes another.`,
	}
	pool := &cobra.Command{Use: "pool", Short: "Create, list or remove warm pools"}
	pool.AddCommand(newPoolCreateCmd(), newPoolLsCmd(), newPoolRmCmd())
	cmd.AddCommand(pool)
	return cmd
}

// kubeBackend returns the Kubernetes backend of the flags.
func kubeBackend(cmd *cobra.Command, bf *backendFlags) (*kube.Backend, error) {
	bf.name = "kubernetes"
	b, err := bf.backend(logger(cmd))
	if err != nil {
		return nil, err
	}
	return b.(*kube.Backend), nil
}

// clusterFlags are the flags that name the cluster and namespace.
func clusterFlags(fs *pflag.FlagSet, bf *backendFlags) {
	bf.register(fs, false)
	_ = fs.MarkHidden("backend")
}

func newPoolCreateCmd() *cobra.Command {
	var bf backendFlags
	var size int
	var image, runtime, network, memory, user, workspace string
	var cpus float64
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Make a warm pool of sandbox pods",
		Long: `create makes the warm pool NAME: --size pods, each a sandbox as --image,
--memory, --cpus, --runtime, --network and --user describe it (the defaults are
run's). A session claimed from it gets one of these pods as it is: the session's
own --image, --memory and the like do not apply, and its --network must be the
pool's (allow needs a pool with none). Each pod holds the workspace at
--pool-workspace (default /workspace), where the session's directory is
uploaded and where its commands and file tools see it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := kubeBackend(cmd, &bf)
			if err != nil {
				return err
			}
			mem, err := units.RAMInBytes(memory)
			if err != nil || mem <= 0 {
				return fmt.Errorf("--memory %q: want a size such as 512m or 2g", memory)
			}
			cfg := kube.PoolConfig{Size: size, Sandbox: sandbox.Config{
				Workspace: workspace, Image: image, Runtime: runtime, Network: network,
				Memory: mem, CPUs: cpus, User: user,
			}}
			if err := b.CreatePool(cmd.Context(), args[0], cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created warm pool %s (%d pods) in namespace %s\n", args[0], size, b.Namespace())
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&size, "size", 2, "how many pods the pool keeps running")
	fs.StringVar(&image, "image", sandbox.DefaultImage, "the pods' image")
	fs.StringVar(&runtime, "runtime", "", "the pods' runtimeClassName, e.g. gvisor (default: the cluster's)")
	fs.StringVar(&network, "network", sandbox.DefaultNetwork, "the pods' network: none (denied all traffic by a NetworkPolicy) or bridge")
	fs.StringVar(&memory, "memory", "2g", "each pod's memory, requested and limited")
	fs.Float64Var(&cpus, "cpus", 0, fmt.Sprintf("each pod's CPUs, requested and limited (default %v)", kube.DefaultCPUs))
	fs.StringVar(&user, "user", "", "UID:GID the pods and their commands run as, never root (default "+kube.DefaultUser+")")
	fs.StringVar(&workspace, "pool-workspace", kube.DefaultPoolWorkspace, "where each pod holds the workspace")
	fs.StringVar(&bf.agentImage, "agent-image", kube.DefaultAgentImage, "the image holding corral's static binary at /corral, which an init container copies into each pod")
	fs.StringVar(&bf.storage, "ephemeral-storage", "4g", "each pod's disk (workspace, /tmp, writable layer), requested and limited")
	fs.BoolVar(&bf.writableRoot, "writable-root", false, "leave the image's root filesystem writable (read-only by default)")
	clusterFlags(fs, &bf)
	return cmd
}

func newPoolLsCmd() *cobra.Command {
	var bf backendFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the namespace's warm pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := kubeBackend(cmd, &bf)
			if err != nil {
				return err
			}
			pools, err := b.Pools(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(pools)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSIZE\tREADY\tIMAGE\tWORKSPACE\tNETWORK\tCREATED")
			for _, p := range pools {
				image, ws, network := p.Image, p.Workspace, p.Network
				if !p.Corral {
					image, ws, network = "(not corral's: template "+p.Template+")", "-", "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\t%s\t%s\t%s ago\n", p.Name, p.Size, p.Ready, p.Pods, image, ws, network, time.Since(p.Created).Round(time.Second))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	clusterFlags(cmd.Flags(), &bf)
	return cmd
}

func newPoolRmCmd() *cobra.Command {
	var bf backendFlags
	cmd := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove warm pools, their templates and their unclaimed pods (claimed ones stay their sessions')",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := kubeBackend(cmd, &bf)
			if err != nil {
				return err
			}
			var errs []error
			for _, name := range args {
				if err := b.DeletePool(cmd.Context(), name); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), "removed", name)
			}
			return errors.Join(errs...)
		},
	}
	clusterFlags(cmd.Flags(), &bf)
	return cmd
}
